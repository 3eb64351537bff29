// Sharded datasets: the manifest that makes K ddpio datasets in one folder read as one
// (docs/FORMAT.md, "Sharded datasets"). Written last by `ddpio convert --shards K`, read by
// DatasetReader::Open. Pure functions, no IO, thread-safe.
//
//   {"format": "ddpio-lmdb-shards", "format_version": 2, "source_fingerprint": "...",
//    "shards": [{"path": "shard-00000-of-00002", "records": 640, "digest": "0123456789abcdef"},
//    ...]}
//
// Version 2 adds each shard's digest (ContentDigest of its header and completion, whose header
// names its place and its dataset, and whose records are bound to it): a manifest that lies —
// a path pointing at another shard, a shard copied in from another dataset — is DataLoss naming the
// shard when the dataset is opened. Version 1 (no digests) is still read.
#ifndef DDPIO_STORAGE_SHARDS_H_
#define DDPIO_STORAGE_SHARDS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::storage {

inline constexpr char kShardsFormatName[] = "ddpio-lmdb-shards";
inline constexpr size_t kMaxShards = 4096;

struct ShardEntry {
  std::string path;  // a folder name inside the dataset's folder (no '/', not "." or "..")
  uint64_t records = 0;
  std::string digest;  // version 2: the shard's ContentDigest (dataset_info.h); empty in version 1
};

struct ShardManifest {
  std::string source_fingerprint;  // of the whole listing and the conversion options
  std::vector<ShardEntry> shards;  // in index order
  // As read (1 or 2). Encoding writes 2 when every shard has a digest, else 1.
  int format_version = 2;
};

// "shard-00001-of-00004".
std::string ShardName(size_t shard, size_t shards);

std::string EncodeShardManifest(const ShardManifest& manifest);
// DataLoss naming the problem for malformed JSON, a missing field, a shard path that is not a
// plain folder name, no shards or more than kMaxShards, or record counts whose sum overflows;
// FailedPrecondition for another format or a version this build does not read.
absl::StatusOr<ShardManifest> DecodeShardManifest(std::string_view json);

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_SHARDS_H_
