// A dataset in an object store (docs/FORMAT.md, "In an object store"): the same LMDB file(s) as
// on disk, stored as objects under a prefix, plus two objects that let a reader fetch whole
// records by HTTP range GETs without walking LMDB's pages over the network:
//
//   PREFIX/data.mdb                              the dataset's LMDB file (unsharded), or
//   PREFIX/shard-00000-of-00004/data.mdb ...     one per shard (sharded)
//   PREFIX/ddpio-index.bin                       where each record's bytes lie (RecordLocation)
//   PREFIX/ddpio-remote.json                     the manifest, written last
//
// The manifest is uploaded after everything it names, so a prefix without it is an unfinished
// upload, never opened as a dataset. It carries the dataset's header and completion marker (as
// a local reader reports them), and for each file its size and the salt its records are bound
// with; the index is checksummed and its size and checksum are in the manifest.
#ifndef DDPIO_STORAGE_REMOTE_REMOTE_FORMAT_H_
#define DDPIO_STORAGE_REMOTE_REMOTE_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/storage/dataset_info.h"

namespace ddpio::storage::remote {

inline constexpr char kRemoteManifestObject[] = "ddpio-remote.json";
inline constexpr char kRecordIndexObject[] = "ddpio-index.bin";
inline constexpr int kRemoteManifestVersion = 1;
// A manifest larger than this is not one (it holds a header and a few lines per shard).
inline constexpr uint64_t kMaxRemoteManifestBytes = uint64_t{64} << 20;
// Records a remote dataset may hold: the index is 16 bytes a record, so 4 GiB of index at most.
inline constexpr uint64_t kMaxRemoteRecords = uint64_t{1} << 28;

// Where record i's stored bytes (what DecodeRecord parses) lie: `length` bytes at `offset` of
// file `file` of the manifest.
struct RecordLocation {
  uint32_t file = 0;
  uint32_t length = 0;
  uint64_t offset = 0;
  bool operator==(const RecordLocation&) const = default;
};

// Binary: "DDPIDX01", u64 count, then per record u32 file, u32 length, u64 offset, then the
// CRC32C of everything before it; all little-endian.
std::string EncodeRecordIndex(absl::Span<const RecordLocation> index);
// DataLoss naming `what` for a wrong magic, size or checksum, a count other than `records`, or a
// record outside its file (files[i] = bytes of file i).
absl::StatusOr<std::vector<RecordLocation>> DecodeRecordIndex(std::string_view bytes,
                                                              uint64_t records,
                                                              absl::Span<const uint64_t> file_bytes,
                                                              const std::string& what);

struct RemoteFile {
  std::string object;  // relative to the prefix: "data.mdb", "shard-00000-of-00004/data.mdb"
  uint64_t bytes = 0;
  uint64_t first = 0;    // the dataset index of the file's record 0
  uint64_t records = 0;  // records in this file; record `first + k` has key k in it
  uint64_t salt = 0;     // RecordBinding::salt of its records
  bool bound = false;    // its records are bound (format 3)
};

struct RemoteManifest {
  int version = kRemoteManifestVersion;
  DatasetHeader header;
  DatasetCompletion completion;
  std::vector<RemoteFile> files;
  uint64_t index_bytes = 0;
  uint32_t index_crc32c = 0;
  std::string uploaded_by;  // the ddpio version that uploaded it
};

std::string EncodeRemoteManifest(const RemoteManifest& manifest);
// DataLoss naming `what` when malformed, when the files do not cover [0, sample_count) in order,
// or for an index size other than 16 bytes a record plus 20; FailedPrecondition for a newer
// version.
absl::StatusOr<RemoteManifest> DecodeRemoteManifest(std::string_view json, const std::string& what);

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_REMOTE_FORMAT_H_
