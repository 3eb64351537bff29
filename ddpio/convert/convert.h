// Conversion into a ddpio dataset: an ImageFolder, a list file, an ImageNet validation folder, a
// Caffe LMDB or an existing ddpio dataset (source_kind.h); or, into a token dataset for language
// models, JSON lines tokenized with SentencePiece, a Megatron-LM indexed dataset or a flat token
// file (token_sources.h: one record per document, ConvertTokens). The `ddpio convert` command and
// Python's `ddpio.convert` are thin layers over Convert(options, progress).
//
// JPEGs are stored as their original bytes; PNG, WebP, BMP, TIFF, PPM and PGM images are decoded
// to Pillow's RGB and stored raw (ddpio/convert/image_decode.h). N threads read and validate
// files (JPEG header, and by default a full strict decode, so a corrupt image is found now rather
// than in epoch 37); one writer appends them in source order in large batches. Each batch commits
// together with the converter's progress (next source entry, skipped entries), so a resumed
// conversion after a crash, a Ctrl-C or a cancellation continues exactly where the last batch
// ended and produces the same dataset as an uninterrupted run.
//
//   ddpio::convert::ConvertOptions o;
//   o.source = "/data/imagenet/train";
//   o.out = "/data/train.lmdb";
//   auto summary = ddpio::convert::Convert(o, [](const ddpio::convert::ConvertProgress& p) {
//     std::printf("%llu/%llu\n", p.entries_done, p.entries_total);
//     return true;  // false stops the conversion; resume = true continues it later
//   });
//
// Thread-safety: Convert may run concurrently for different outputs; it starts and joins its own
// threads and calls the progress callback on the calling thread only.
#ifndef DDPIO_CONVERT_CONVERT_H_
#define DDPIO_CONVERT_CONVERT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/convert/convert_sources.h"
#include "ddpio/convert/image_decode.h"
#include "ddpio/convert/image_shrink.h"
#include "ddpio/convert/source_kind.h"
#include "ddpio/convert/source_reader.h"
#include "ddpio/storage/dataset_writer.h"

namespace ddpio::convert {

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

// Shared by the parts of a sharded conversion: what they have done, added up for the progress
// callback. Every count includes entries done before a resume.
struct ConvertCounters {
  std::atomic<uint64_t> entries{0};       // source entries done (stored or skipped)
  std::atomic<uint64_t> skipped{0};       // of which skipped
  std::atomic<uint64_t> source_bytes{0};  // bytes read from the source in this run
};

// The settings of a token conversion (source kinds jsonl, megatron, tokens; token_sources.h).
struct TokenConvertOptions {
  std::string tokenizer;            // jsonl: the SentencePiece model (.model)
  std::string text_field = "text";  // jsonl: the field holding each document's text
  // jsonl: the id appended to every document; the others: the id that ends one (tokens: where the
  // file is split). -2: jsonl the model's EOS, the others none; -1: none.
  int64_t eos_id = -2;
  std::string dtype;  // tokens: a raw file's ids, "uint16" or "uint32" (a .npy says its own)
};

struct ConvertOptions {
  // What to read (Convert(options); Convert(listing, options) ignores these four). `source` is
  // the folder, list file, LMDB or dataset; `source_kind` says which (default: an ImageFolder).
  std::string source;
  SourceKind source_kind = SourceKind::kImageFolder;
  std::string list_root;  // kList: folder the paths are relative to; empty: the list file's folder
  // kImageFolder: a flat folder of ImageNet validation images labelled by this file
  // (LOC_val_solution.csv, or the devkit's ground truth with `synsets`); empty: an ImageFolder.
  std::string val_labels;
  std::string synsets;  // with the devkit's ground truth: its ID order (imagenet_labels.h)
  // The dataset to create (a directory, or a file with writer.single_file). Empty only with
  // kDataset: the dataset is then rewritten in place (dataset_source.h, UpgradeInPlace).
  std::string out;
  int threads = 0;            // reading/validating threads; 0: all cores
  bool resume = false;        // continue an interrupted conversion of the same source
  bool skip_invalid = false;  // skip unreadable/non-JPEG/corrupt files instead of stopping
  bool full_decode = true;    // validate by decoding every image (false: header only)
  ShrinkOptions shrink;       // max_side (0: off, else 16 to 65535) and quality (1 to 100)
  // Most memory one thread may spend decoding a non-JPEG image (ddpio/convert/image_decode.h);
  // larger images are refused (DataLoss, skippable). Default 1 GiB: a 60 MP TIFF, a 75 MP PNG.
  // The conversion's decoding memory is at most threads x this. At least 16 MiB.
  uint64_t max_decode_bytes = kDefaultMaxDecodeBytes;
  // Restart markers every N MCUs (rounded down to a divisor of the MCUs in a row), so the loader
  // decodes only a crop's segments (loader/jpeg_restart.h); 0 keeps JPEG bytes as they are.
  // The default, 4, is the measured choice (docs/PERFORMANCE.md). At most 64.
  int restart_interval = kDefaultRestartInterval;
  // > 1: a sharded dataset — the listing split into this many contiguous parts, converted in
  // parallel (threads shared out among them) into out/shard-k-of-K, then the manifest written
  // (storage/shards.h). Reads as one dataset in the same order as an unsharded conversion.
  int shards = 1;
  storage::WriterOptions writer;
  TokenConvertOptions tokens;  // jsonl, megatron and tokens sources only
  // Not owned; may be null. Once it reads true the conversion stops as a cancelling progress
  // callback stops it (Convert's contract). Checked after every source entry.
  std::atomic<bool>* cancel = nullptr;
  ConvertObserver* observer = nullptr;  // not owned; may be null
  SourceReader* reader = nullptr;       // not owned; null: files under the listing's root

  // Set by the sharded conversion for each of its parts, not by callers: the part's place and
  // the whole dataset's fingerprint, written into the part's header (format 3: a shard knows its
  // place), and where the part adds up what it has done.
  uint64_t shard_index = 0;
  uint64_t shard_count = 0;
  std::string dataset_fingerprint;
  ConvertCounters* counters = nullptr;
};

// Checks the settings' ranges and combinations (those Convert(options) reads); InvalidArgument
// naming the setting otherwise.
absl::Status ValidateConvertOptions(const ConvertOptions& options);

// What a progress callback sees.
struct ConvertProgress {
  uint64_t entries_done = 0;       // source entries done (stored or skipped), including a resume's
  uint64_t entries_total = 0;      // source entries in all; 0 while unknown
  uint64_t records = 0;            // entries stored
  uint64_t skipped = 0;            // entries skipped (skip_invalid)
  uint64_t source_bytes_read = 0;  // bytes read from the source in this run
  bool final = false;              // the last call: the dataset is complete
};

// Called on Convert's calling thread: once the source is listed, then at most every 100 ms while
// entries are done, then once with `final` set when the dataset is complete. Returning false
// stops the conversion as a crash would, but cleanly: everything done is committed with its
// progress, the dataset stays incomplete (no reader opens it) and a conversion with resume set
// continues it.
using ProgressCallback = std::function<bool(const ConvertProgress&)>;

struct SkippedFile {
  uint64_t source_index = 0;
  std::string relative;
  std::string reason;
};

// Parses the progress entry a conversion stores with every commit (what --resume continues
// from). DataLoss naming what is malformed.
absl::Status ParseConvertProgress(const std::string& text, uint64_t* next_source,
                                  std::vector<SkippedFile>* skipped);

struct ConvertSummary {
  std::string source;    // what was converted, as the user named it (folder, list file, LMDB)
  std::string out;       // the dataset written (the source itself when rewritten in place)
  uint64_t entries = 0;  // source entries in the listing
  uint64_t records = 0;
  uint64_t classes = 0;
  uint64_t payload_bytes = 0;
  bool token_dataset = false;      // ConvertTokens: the records are documents of token ids
  uint64_t tokens = 0;             // a token dataset's ids in all
  uint64_t source_bytes_read = 0;  // bytes read from source files in this run
  std::vector<SkippedFile> skipped;
  std::map<std::string, uint64_t> stored_as;  // records of this run by how they were stored
  uint64_t resumed_from = 0;                  // source entries already done before this run
  bool already_complete = false;              // resume on a finished dataset: nothing to do
  double seconds = 0;
};

// Lists options.source by its kind and converts it into options.out (or in place: kDataset with
// no out). Errors: InvalidArgument for settings out of range or not fitting together
// (ValidateConvertOptions); NotFound / InvalidArgument / DataLoss from reading the source's
// listing; then as Convert(listing, ...).
absl::StatusOr<ConvertSummary> Convert(const ConvertOptions& options,
                                       const ProgressCallback& progress = nullptr);

// Converts `listing` (its entries read through options.reader, or files under listing.root).
// Errors: from the writer (AlreadyExists without resume, FailedPrecondition when resuming a
// different source); DataLoss / NotFound / PermissionDenied naming the source file when one is
// bad and skip_invalid is off — everything before it is committed, so after fixing the file a
// resumed conversion continues from there; Cancelled (naming the setting resume_conversion) when
// `progress` returned false or options.cancel became true — everything done is committed and
// the dataset is left incomplete and resumable.
absl::StatusOr<ConvertSummary> Convert(const SourceListing& listing, const ConvertOptions& options,
                                       const ProgressCallback& progress = nullptr);

// What a resumed conversion must match: the listing and the options that change the records.
std::string ConvertFingerprint(const SourceListing& listing, const ConvertOptions& options);

// A token conversion (IsTokenSource(options.source_kind); Convert calls it): one record per
// document (record.h, kTokensUint16 / kTokensUint32), in source order, threads tokenizing JSON
// lines in parallel; resumable and cancellable as Convert. The dataset is format version 4 with the
// vocabulary in its header (dataset_info.h, TokenInfo). Errors as Convert, and InvalidArgument /
// DataLoss / NotFound from opening the source (token_sources.h).
absl::StatusOr<ConvertSummary> ConvertTokens(const ConvertOptions& options,
                                             const ProgressCallback& progress = nullptr);

// Convert with options.shards > 1 (Convert calls it).
absl::StatusOr<ConvertSummary> ConvertSharded(const SourceListing& listing,
                                              const ConvertOptions& options,
                                              const ProgressCallback& progress = nullptr);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_CONVERT_H_
