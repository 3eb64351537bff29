// Sharded datasets: the manifest that makes K ddpio datasets in one folder read as one
// (docs/FORMAT.md, "Sharded datasets"). Written last by `ddpio convert --shards K`, read by
// DatasetReader::Open. Pure functions, no IO, thread-safe.
//
//   {"format": "ddpio-lmdb-shards", "format_version": 1, "source_fingerprint": "...",
//    "shards": [{"path": "shard-00000-of-00002", "records": 640}, ...]}
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
};

struct ShardManifest {
  std::string source_fingerprint;  // of the whole listing and the conversion options
  std::vector<ShardEntry> shards;  // in index order
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
