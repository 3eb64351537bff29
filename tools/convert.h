// `ddpio convert`: a source listing (ImageFolder, list file, ImageNet validation folder or Caffe
// LMDB) into a ddpio dataset.
//
// JPEGs are stored as their original bytes; PNG, WebP, BMP, TIFF, PPM and PGM images are decoded
// to Pillow's RGB and stored raw (tools/image_decode.h). N threads read and validate files (JPEG header, and by default a full strict decode, so a
// corrupt image is found now rather than in epoch 37); one writer appends them in source order
// in large batches. Each batch commits together with the converter's progress (next source
// entry, skipped entries), so --resume after a crash or Ctrl-C continues exactly where the last
// batch ended and produces the same dataset as an uninterrupted run.
#ifndef DDPIO_TOOLS_CONVERT_H_
#define DDPIO_TOOLS_CONVERT_H_

#include <cstdint>
#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/storage/dataset_writer.h"
#include "tools/convert_sources.h"
#include "tools/image_decode.h"
#include "tools/image_shrink.h"
#include "tools/source_reader.h"

namespace ddpio::tools {

// Watches a conversion from the converting thread. Tests supply one to inject faults — a crash
// between two commits, as LevelDB's fault-injecting Env does — the shipped program none.
class ConvertObserver {
 public:
  virtual ~ConvertObserver() = default;
  // The n-th batch (n >= 1) and its progress entry were committed durably.
  virtual void Committed(uint64_t n) = 0;
};

// Restart markers every 4 MCUs: crop decodes within ~2% of the finest interval for +0.7% bytes.
inline constexpr int kDefaultRestartInterval = 4;

struct ConvertOptions {
  std::string out;
  int threads = 0;            // reading/validating threads; 0: all cores
  bool resume = false;        // continue an interrupted conversion of the same source
  bool skip_invalid = false;  // skip unreadable/non-JPEG/corrupt files instead of stopping
  bool full_decode = true;    // validate by decoding every image (false: header only)
  bool progress = true;
  ShrinkOptions shrink;  // --max-side, --quality
  // Most memory one thread may spend decoding a non-JPEG image (tools/image_decode.h); larger
  // images are refused (DataLoss, skippable). Default 1 GiB: a 60 MP TIFF, a 75 MP PNG. The
  // conversion's decoding memory is at most threads x this.
  uint64_t max_decode_bytes = kDefaultMaxDecodeBytes;
  // Restart markers every N MCUs (rounded down to a divisor of the MCUs in a row), so the loader
  // decodes only a crop's segments (loader/jpeg_restart.h); 0 keeps JPEG bytes as they are.
  // The default, 4, is the measured choice (docs/PERFORMANCE.md).
  int restart_interval = kDefaultRestartInterval;
  // > 1: a sharded dataset — the listing split into this many contiguous parts, converted in
  // parallel (threads shared out among them) into out/shard-k-of-K, then the manifest written
  // (storage/shards.h). Reads as one dataset in the same order as an unsharded conversion.
  int shards = 1;
  // Set by the sharded conversion for each of its parts: the part's place and the whole
  // dataset's fingerprint, written into the part's header (format 3: a shard knows its place).
  uint64_t shard_index = 0;
  uint64_t shard_count = 0;
  std::string dataset_fingerprint;
  std::atomic<uint64_t>* entries_done = nullptr;  // if set, advanced as entries are done
  storage::WriterOptions writer;
  ConvertObserver* observer = nullptr;  // not owned; may be null
  SourceReader* reader = nullptr;       // not owned; null: files under the listing's root
};

struct SkippedFile {
  uint64_t source_index = 0;
  std::string relative;
  std::string reason;
};

// Parses the progress entry a conversion stores with every commit (what --resume continues
// from). DataLoss naming what is malformed.
absl::Status ParseConvertProgress(const std::string& text, uint64_t* next_source, std::vector<SkippedFile>* skipped);

struct ConvertSummary {
  uint64_t records = 0;
  uint64_t classes = 0;
  uint64_t payload_bytes = 0;
  uint64_t source_bytes_read = 0;  // bytes read from source files in this run
  std::vector<SkippedFile> skipped;
  std::map<std::string, uint64_t> stored_as;  // records of this run by how they were stored
  uint64_t resumed_from = 0;       // source entries already done before this run
  bool already_complete = false;   // --resume on a finished dataset: nothing to do
  double seconds = 0;
};

// Errors: from the writer (AlreadyExists without --resume, FailedPrecondition when resuming a
// different source); DataLoss / NotFound / PermissionDenied naming the source file when one is
// bad and skip_invalid is off — everything before it is committed, so after fixing the file
// --resume continues from there.
absl::StatusOr<ConvertSummary> Convert(const SourceListing& listing, const ConvertOptions& options);

// What a resumed conversion must match: the listing and the options that change the records.
std::string ConvertFingerprint(const SourceListing& listing, const ConvertOptions& options);

// Convert with options.shards > 1 (Convert calls it).
absl::StatusOr<ConvertSummary> ConvertSharded(const SourceListing& listing, const ConvertOptions& options);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CONVERT_H_
