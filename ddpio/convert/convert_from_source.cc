// Convert(options) (convert.h): the settings checked, the source listed by its kind, then the
// listing converted.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/caffe_lmdb.h"
#include "ddpio/convert/convert.h"
#include "ddpio/convert/convert_sources.h"
#include "ddpio/convert/dataset_source.h"
#include "ddpio/convert/imagenet_labels.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/lmdb_file.h"
#include "ddpio/storage/shards.h"

namespace ddpio::convert {
namespace {

absl::Status Bad(std::string_view setting, std::string message) {
  return WithSetting(absl::InvalidArgumentError(std::move(message)), setting);
}

// Checks that `value` is in [lo, hi]; InvalidArgument naming `setting` otherwise.
absl::Status InRange(std::string_view setting, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return Bad(setting,
             absl::StrCat(std::string(setting), " must be from ", lo, " to ", hi, ", not ", value));
}

}  // namespace

absl::Status ValidateConvertOptions(const ConvertOptions& o) {
  const std::string kind(SourceKindName(o.source_kind));
  if (o.source.empty())
    return Bad("source", "source is empty: name the folder, list file, LMDB or dataset to convert");
  if (o.out.empty() && o.source_kind != SourceKind::kDataset) {
    return Bad(
        "out",
        "out is empty: name the dataset to create (only a 'dataset' source may omit it, to be "
        "rewritten in place)");
  }
  if (!o.val_labels.empty() && o.source_kind != SourceKind::kImageFolder) {
    return Bad(
        "val_labels",
        absl::StrCat("val_labels labels a flat folder of images (source kind 'imagefolder'), "
                     "not a '",
                     kind, "' source"));
  }
  if (!o.synsets.empty() && o.val_labels.empty()) {
    return Bad("synsets", "synsets goes with val_labels (the devkit's ground truth)");
  }
  if (!o.list_root.empty() && o.source_kind != SourceKind::kList) {
    return Bad("list_root",
               absl::StrCat("list_root is for a 'list' source, not a '", kind, "' source"));
  }
  const bool tokens = IsTokenSource(o.source_kind);
  if (!o.tokens.tokenizer.empty() && o.source_kind != SourceKind::kJsonl) {
    return Bad("tokenizer", absl::StrCat("a tokenizer tokenizes JSON lines (source kind 'jsonl'), "
                                         "not a '",
                                         kind, "' source"));
  }
  if (!o.tokens.dtype.empty() && o.source_kind != SourceKind::kTokens) {
    return Bad("dtype", absl::StrCat("dtype says how a flat token file (source kind 'tokens') "
                                     "stores its ids, not a '",
                                     kind, "' source"));
  }
  if (o.tokens.eos_id != -2 && !tokens) {
    return Bad("eos_id", absl::StrCat("eos_id goes with token sources (jsonl, megatron, tokens), "
                                      "not a '",
                                      kind, "' source"));
  }
  if (o.tokens.eos_id < -2 || o.tokens.eos_id > int64_t{UINT32_MAX}) {
    return Bad("eos_id", absl::StrCat("eos_id ", o.tokens.eos_id, " is not a token id (0 to ",
                                      UINT32_MAX, ") nor -1 (none)"));
  }
  if (!o.tokens.dtype.empty() && o.tokens.dtype != "uint16" && o.tokens.dtype != "uint32") {
    return Bad("dtype", absl::StrCat("dtype '", o.tokens.dtype, "' is neither uint16 nor uint32"));
  }
  if (tokens && o.out.empty()) return Bad("out", "out is empty: name the dataset to create");
  DDPIO_RETURN_IF_ERROR(InRange("threads", o.threads, 0, 1 << 16));
  DDPIO_RETURN_IF_ERROR(InRange("shards", o.shards, 1, static_cast<int64_t>(storage::kMaxShards)));
  DDPIO_RETURN_IF_ERROR(InRange("restart_interval", o.restart_interval, 0, 64));
  if (o.shrink.max_side != 0)
    DDPIO_RETURN_IF_ERROR(InRange("max_side", o.shrink.max_side, 16, 65535));
  DDPIO_RETURN_IF_ERROR(InRange("quality", o.shrink.quality, 1, 100));
  if (o.max_decode_bytes < (uint64_t{16} << 20)) {
    return Bad("max_decode_bytes",
               absl::StrCat("max_decode_bytes must be at least 16 MiB, not ", o.max_decode_bytes));
  }
  if (o.writer.batch_records < 1) {
    return Bad("batch_records",
               absl::StrCat("batch_records must be at least 1, not ", o.writer.batch_records));
  }
  return absl::OkStatus();
}

absl::StatusOr<ConvertSummary> Convert(const ConvertOptions& options,
                                       const ProgressCallback& progress) {
  DDPIO_RETURN_IF_ERROR(ValidateConvertOptions(options));
  ConvertOptions o = options;
  if (IsTokenSource(o.source_kind)) return ConvertTokens(o, progress);
  switch (o.source_kind) {
    case SourceKind::kList: {
      DDPIO_ASSIGN_OR_RETURN(SourceListing listing, ReadListFile(o.source, o.list_root));
      return Convert(listing, o, progress);
    }
    case SourceKind::kCaffeLmdb: {
      DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<storage::LmdbFile> lmdb,
                             storage::LmdbFile::Open(o.source));
      CaffeLmdbReader reader(lmdb.get());
      o.reader = &reader;
      DDPIO_ASSIGN_OR_RETURN(SourceListing listing, ListCaffeLmdb(*lmdb));
      return Convert(listing, o, progress);
    }
    case SourceKind::kDataset: {
      if (o.out.empty()) {
        SourceListing upgraded;
        return UpgradeInPlace(o.source, o, &upgraded, progress);
      }
      DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<storage::DatasetReader> dataset,
                             storage::DatasetReader::Open(o.source));
      DatasetSourceReader reader(dataset.get());
      o.reader = &reader;
      DDPIO_ASSIGN_OR_RETURN(SourceListing listing, ListDataset(*dataset));
      return Convert(listing, o, progress);
    }
    case SourceKind::kImageFolder:
    case SourceKind::kJsonl:
    case SourceKind::kMegatron:
    case SourceKind::kTokens:
      break;
  }
  if (!o.val_labels.empty()) {
    DDPIO_ASSIGN_OR_RETURN(ValLabels labels, ReadValLabels(o.val_labels, o.synsets));
    DDPIO_ASSIGN_OR_RETURN(SourceListing listing,
                           ListLabeledFolder(o.source, labels, o.val_labels));
    return Convert(listing, o, progress);
  }
  DDPIO_ASSIGN_OR_RETURN(SourceListing listing, ListImageFolder(o.source));
  return Convert(listing, o, progress);
}

}  // namespace ddpio::convert
