// A dataset in an object store (docs/FORMAT.md, "In an object store"): its records, stored as
// objects under a prefix, plus two objects that let a reader fetch whole records by HTTP range
// GETs without walking LMDB's pages over the network:
//
//   PREFIX/chunks/LLLLLLLL/00/00000000 ...       chunk objects: whole records back to back, or
//   PREFIX/data.mdb                              the LMDB file as it is (unsharded), or
//   PREFIX/shard-00000-of-00004/data.mdb ...     one per shard (sharded)
//   PREFIX/ddpio-index.bin                       where each record's bytes lie (RecordLocation)
//   PREFIX/ddpio-remote.json                     the manifest, written last
//
// The manifest is uploaded after everything it names, so a prefix without it is an unfinished
// upload, never opened as a dataset. It carries the dataset's header and completion marker (as
// a local reader reports them), and for each file its size and the salt its records are bound
// with; the index is checksummed and its size and checksum are in the manifest, and (version 2)
// a digest of every record's checksum: what tells two datasets apart when their layouts agree.
// A token dataset's index (version 4) also carries each document's length, so that a reader
// knows them without fetching a record.
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
// Version 1 wrote as the index's checksum the CRC32C of the whole index, trailing checksum
// included: the CRC-32C residue, the same for every index (kCrc32cResidue), so it told nothing.
// Version 2 writes the checksum the index ends with (of every byte before it) and the records'
// digest. Version 3 (written for an image dataset stored in chunk objects, which older readers
// must refuse) adds a file's `key_first`. Version 4 (written only for a token dataset, in either
// layout: its index is then larger, which older readers must refuse) says that the index carries
// each record's document length. Versions 1 to 3 are still read; what version 1 cannot prove is
// said where it matters.
inline constexpr int kRemoteManifestVersion = 4;           // the newest this build reads
inline constexpr int kRemoteManifestVersionOfLengths = 4;  // an upload of a token dataset
inline constexpr int kRemoteManifestVersionOfChunks = 3;   // ... of images in chunk objects
inline constexpr int kRemoteManifestVersionOfFiles = 2;    // ... of images' LMDB files
inline constexpr uint32_t kCrc32cResidue = 0x48674BC7;
// A manifest larger than this is not one (it holds a header and a few lines per shard).
inline constexpr uint64_t kMaxRemoteManifestBytes = uint64_t{64} << 20;
// Records a remote dataset may hold: the index is 16 bytes a record (20 with document lengths),
// so 5 GiB of index at most.
inline constexpr uint64_t kMaxRemoteRecords = uint64_t{1} << 28;

// Where record i's stored bytes (what DecodeRecord parses) lie: `length` bytes at `offset` of
// file `file` of the manifest.
struct RecordLocation {
  uint32_t file = 0;
  uint32_t length = 0;
  uint64_t offset = 0;
  bool operator==(const RecordLocation&) const = default;
};

// A record index as decoded: where each record lies and, in a token dataset's (version 4), each
// record's document length in token ids.
struct RecordIndex {
  std::vector<RecordLocation> locations;
  std::vector<uint32_t> document_lengths;  // one per record, or empty: not carried
};

// Binary, all little-endian: "DDPIDX01", u64 count, then per record u32 file, u32 length, u64
// offset, then the CRC32C of everything before it. With `document_lengths` (one per record, a
// token dataset's): "DDPIDX02", and the count's u32 lengths after the locations, before the
// CRC32C. Without (empty), the index older readers read.
std::string EncodeRecordIndex(absl::Span<const RecordLocation> index,
                              absl::Span<const uint32_t> document_lengths = {});
// An encoded index's size: 20 bytes and 16 a record, 20 with document lengths.
uint64_t RecordIndexBytes(uint64_t records, bool document_lengths);
// The checksum an encoded index ends with (its bytes before the last 4); 0 for fewer than 4 bytes.
uint32_t RecordIndexChecksum(std::string_view index_bytes);

// What identifies a dataset's records, whatever their layout: FNV-1a 64 over, in dataset order,
// each record's stored length and the CRC32C it stores (its first 4 bytes, covering every byte
// after them: docs/FORMAT.md). Two datasets whose indexes agree byte for byte (same sizes at the
// same offsets) differ here as soon as one record's content does.
class RecordsDigest {
 public:
  // `stored`: record i's stored bytes, in order of i.
  void Add(absl::Span<const uint8_t> stored);
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ull;
};
// DataLoss naming `what` for a wrong magic, size or checksum, a count other than `records`, a
// record outside its file (files[i] = bytes of file i), or document lengths where the manifest
// says there are none (`document_lengths` false) or none where it says there are.
absl::StatusOr<RecordIndex> DecodeRecordIndex(std::string_view bytes, uint64_t records,
                                              absl::Span<const uint64_t> file_bytes,
                                              bool document_lengths, const std::string& what);
// Whether the document lengths `index` carries (none: OK) can be those of the token dataset of
// `header` and `completion`, as a local reader holds its own (dataset_info.h, TokenLengthsKey):
// each document's ids fit its record (their bytes at most its stored bytes less a record's
// header), and they add up to the payload bytes the completion marker counts. DataLoss naming
// `what` (the index object) otherwise, or for lengths in an image dataset.
absl::Status CheckDocumentLengths(const RecordIndex& index, const DatasetHeader& header,
                                  const DatasetCompletion& completion, const std::string& what);

// An object holding records: an LMDB file ("data.mdb", "shard-00000-of-00004/data.mdb"), or a
// chunk object ("chunks/5f3a9c01/00/00000012"): records' stored bytes back to back, whole records
// only.
struct RemoteFile {
  std::string object;  // relative to the prefix
  uint64_t bytes = 0;
  uint64_t first = 0;    // the dataset index of the file's record 0
  uint64_t records = 0;  // records in this file; record `first + k` has key `key_first + k`
  uint64_t salt = 0;     // RecordBinding::salt of its records
  bool bound = false;    // its records are bound (format 3)
  // The key its record 0 was written with in its LMDB file (version 3): 0 for an LMDB file, the
  // place of the chunk's first record in its file (or shard) for a chunk object.
  uint64_t key_first = 0;
};

struct RemoteManifest {
  int version = kRemoteManifestVersionOfFiles;
  DatasetHeader header;
  DatasetCompletion completion;
  std::vector<RemoteFile> files;
  uint64_t index_bytes = 0;
  // Version 2: RecordIndexChecksum of the index. Version 1: kCrc32cResidue, checking nothing.
  uint32_t index_crc32c = 0;
  // Version 2: RecordsDigest of the records; 0 in a version 1 manifest (never written).
  uint64_t records_digest = 0;
  std::string uploaded_by;  // the ddpio version that uploaded it
  // Version 4: the index carries every record's document length (a token dataset's; never an
  // image dataset's), 4 bytes a record more (RecordIndexBytes).
  bool document_lengths = false;

  // Whether the manifest identifies its records (version 2): an index checksum that is not a
  // constant and the records' digest.
  bool identifies_records() const { return version >= 2; }
  // Whether `index_bytes` is the index this manifest was written with, as far as it can tell
  // (size always; from version 2 on the checksum it ends with, which DecodeRecordIndex then
  // holds to its bytes).
  bool MatchesIndex(std::string_view index_bytes) const;
  // A name for this dataset's content, letters, digits and '-': its id (or "dataset") and 16 hex
  // digits of a digest of the header, the completion, the index checksum and the records' digest.
  // Two datasets with other records get other names (version 2); version 1 manifests, which
  // carry no records' digest, are told apart by header, completion and `index_checksum` (the
  // index's own trailing checksum, which the caller read).
  std::string ContentName(uint32_t index_checksum) const;
};

std::string EncodeRemoteManifest(const RemoteManifest& manifest);
// DataLoss naming `what` when malformed (JSON nested deeper than kMaxJsonDepth or larger than
// kMaxRemoteManifestBytes included), when the files do not cover [0, sample_count) in order, for
// an index size other than RecordIndexBytes, or for document lengths in an image dataset;
// FailedPrecondition for a newer version.
absl::StatusOr<RemoteManifest> DecodeRemoteManifest(std::string_view json, const std::string& what);

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_REMOTE_FORMAT_H_
