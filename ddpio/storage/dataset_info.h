// Dataset-level metadata of the ddpio LMDB format and its JSON encoding.
//
// Two metadata entries live in the "meta" database (docs/FORMAT.md):
//   "dataset"  written when the dataset is created: format name and version, class names in
//              label order, what it was made from, the tool version.
//   "complete" written last, in the same transaction as the final records: the record count
//              and totals. Its absence means the dataset is incomplete.
// Also here: the sample key encoding (8-byte big-endian index, so key order = index order).
// Pure functions, thread-safe.
#ifndef DDPIO_STORAGE_DATASET_INFO_H_
#define DDPIO_STORAGE_DATASET_INFO_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::storage {

inline constexpr char kFormatName[] = "ddpio-lmdb";
// Version 1: every record in layout 1. Version 2: records may use layout 2 (record.h; written
// by `convert --max-side`), so a build that reads only version 1 refuses the dataset up front.
// Version 3 (written by every conversion since): every record in layout 3, its checksum bound to
// its key and to the dataset (RecordSalt), and a shard's header names its place in its dataset.
// Version 4: a token dataset (records of a token content type, the header's `tokens` block), so a
// build that knows only images refuses it up front rather than record by record. Image datasets
// are still written as version 3.
inline constexpr int kFormatVersion = 1;
inline constexpr int kBoundRecordsFormatVersion = 3;
inline constexpr int kTokensFormatVersion = 4;
inline constexpr int kMaxFormatVersion = 4;

// LMDB names.
inline constexpr char kSamplesDb[] = "samples";
inline constexpr char kMetaDb[] = "meta";
inline constexpr char kDatasetKey[] = "dataset";
inline constexpr char kCompleteKey[] = "complete";

// What a valid header may hold: DecodeHeader refuses more (DataLoss) and DatasetWriter::Create
// will not write more (InvalidArgument), so a header read from a dataset, a shard or a remote
// manifest costs a bounded amount of memory however it was forged. Labels are int32, but a class
// list as long as the label range would be a header of gigabytes: a million classes is 45 times
// ImageNet-21k's 21,841 and the label bound `convert --list` and Caffe LMDBs already enforce. A
// class name is one folder name (NAME_MAX, 255 bytes on Linux) or a synset, so 4 KiB is ample. The
// whole header (the JSON as stored) holds the million classes named "0" ... "999999" (about 9 MB).
inline constexpr size_t kMaxClasses = 1'000'000;
inline constexpr size_t kMaxClassNameBytes = 4096;
inline constexpr size_t kMaxHeaderBytes = size_t{16} << 20;

// A token dataset's vocabulary (the header's `tokens` block; format version 4): one record per
// document, its ids `width` bytes each (record.h, kTokensUint16 / kTokensUint32).
struct TokenInfo {
  int width = 0;            // 2 or 4; 0: not a token dataset (images)
  int64_t eos_id = -1;      // the id ending every document; -1: documents have no end marker
  uint64_t vocab_size = 0;  // ids are below it; 0: not known (a Megatron or flat token file)
  std::string tokenizer;    // the SentencePiece model the text was tokenized with, or empty
};

// Written at creation.
struct DatasetHeader {
  int format_version = kBoundRecordsFormatVersion;
  std::vector<std::string> classes;  // label i is classes[i]
  std::string source_kind;           // "imagefolder", "list" or "api"
  std::string source_path;           // what the user pointed at
  std::string source_fingerprint;    // digest of the source listing and conversion options
  uint64_t source_files = 0;         // entries in the source listing
  std::string tool_version;          // ddpio version that created the dataset
  // Version 3: 32 random hex digits drawn when the dataset is created (kept by a resume), so two
  // conversions — even of the same files — are two datasets, and a copy is the same one.
  std::string id;
  // A shard of a sharded dataset (version 3; shard_count 0: not a shard): its place, and the
  // fingerprint of the whole dataset it belongs to (the manifest's source_fingerprint).
  uint64_t shard_index = 0;
  uint64_t shard_count = 0;
  std::string dataset_fingerprint;
  TokenInfo tokens;  // a token dataset (format version 4); width 0 for images
};

inline bool IsTokenDataset(const DatasetHeader& header) { return header.tokens.width != 0; }

// A token dataset's document lengths (ids per record), written by its conversion with every
// commit: under TokenLengthsKey(first) the lengths of records first, first + 1, ... committed
// together, 4 bytes little-endian each; the next entry's key is first + their count. So a
// reader finds every document's length in a few metadata reads, without touching a record.
inline constexpr char kTokenLengthsKeyPrefix[] = "token_lengths/";
std::string TokenLengthsKey(uint64_t first);

// Whether records of a dataset with this header are bound to their keys (version 3).
inline bool RecordsBound(const DatasetHeader& header) {
  return header.format_version >= kBoundRecordsFormatVersion;
}
// The salt a version-3 dataset's records are bound with (record.h, RecordBinding): FNV-1a of the
// dataset's id, its source fingerprint and the shard's place, so every conversion and every shard
// of one has its own, and a resumed conversion keeps its own.
uint64_t RecordSalt(const DatasetHeader& header);
// What a reader says about a dataset's record protection (inspect): "records bound to their keys
// and dataset (format 3)" or why older datasets are protected less, and how to upgrade.
std::string RecordProtection(const DatasetHeader& header);

// Written last.
struct DatasetCompletion {
  uint64_t sample_count = 0;
  uint64_t payload_bytes = 0;  // sum of payload sizes
  uint64_t skipped = 0;        // source entries left out (convert --skip-invalid)
};

std::string EncodeHeader(const DatasetHeader& header);
// A new dataset id: 32 hex digits from the system's random source.
std::string NewDatasetId();
// DataLoss when the JSON is malformed, misses a field, is larger than kMaxHeaderBytes, nests
// deeper than kMaxJsonDepth, or names more than kMaxClasses classes or a class name longer than
// kMaxClassNameBytes; FailedPrecondition when it names another format or a version this build
// does not read.
absl::StatusOr<DatasetHeader> DecodeHeader(std::string_view json);

std::string EncodeCompletion(const DatasetCompletion& completion);
// DataLoss when the JSON is malformed, over 64 KiB (the marker is three counts), nests deeper than
// kMaxJsonDepth, or a count is not a non-negative 64-bit integer.
absl::StatusOr<DatasetCompletion> DecodeCompletion(std::string_view json);

// What identifies a dataset's content for agreeing across ranks that each opened their own copy:
// "ddpio-lmdb v1, 1000 records, 10 classes, digest 0123456789abcdef", the digest an FNV-1a of the
// header and completion as stored (so a copy of a dataset is identical, another conversion is
// not). The path is not part of it: copies on different hosts may live at different paths.
std::string DatasetIdentity(const DatasetHeader& header, const DatasetCompletion& completion);
// The digest in it: 16 hex digits of FNV-1a over the header and completion as stored (what a
// shard manifest records for each shard).
std::string ContentDigest(const DatasetHeader& header, const DatasetCompletion& completion);

// OK when `val` names the same classes as `train`, in the same order (labels mean the same
// thing); otherwise InvalidArgument naming the first label that differs, or the counts, and how
// to convert the validation set so it matches.
absl::Status CheckSameClasses(const std::vector<std::string>& train,
                              const std::vector<std::string>& val);

// Sample keys: the index as 8 big-endian bytes.
using IndexKey = std::array<uint8_t, 8>;
IndexKey EncodeIndexKey(uint64_t index);
uint64_t DecodeIndexKey(const uint8_t* key8);
// "0000000000000011" for index 17: how messages name a key.
std::string IndexKeyHex(uint64_t index);

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_DATASET_INFO_H_
