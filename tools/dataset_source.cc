#include "tools/dataset_source.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::tools {
namespace fs = std::filesystem;
namespace {

std::string WithoutTrailingSlash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

absl::Status Rename(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("renaming ", from, " to ", to));
  return absl::OkStatus();
}

absl::Status RemoveOld(const std::string& replaced) {
  std::error_code ec;
  fs::remove_all(replaced, ec);
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("removing the old dataset ", replaced));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SourceListing> ListDataset(const storage::DatasetReader& dataset) {
  SourceListing listing;
  listing.kind = "ddpio-dataset";
  listing.root = dataset.path();
  const storage::DatasetHeader& h = dataset.header();
  listing.described = absl::StrCat(dataset.path(), h.source_kind.empty() ? "" : absl::StrCat(" (from ", h.source_kind,
                                                                                             " ", h.source_path, ")"));
  listing.classes = h.classes;
  listing.entries.reserve(dataset.size());
  DDPIO_ASSIGN_OR_RETURN(storage::ReadTxn txn, dataset.BeginRead());
  for (uint64_t i = 0; i < dataset.size(); ++i) {
    DDPIO_ASSIGN_OR_RETURN(storage::RecordView r, txn.Get(i));
    listing.entries.push_back({std::string(r.source_name), r.label});
    DDPIO_RETURN_IF_ERROR(txn.CheckMapped());  // the name was copied out of the map after Get
    if (i % 4096 == 4095) txn.Reset();  // do not pin the pages of a whole scan
  }
  return listing;
}

std::string DatasetSourceReader::Describe(const SourceEntry& entry) const {
  return absl::StrCat("record '", entry.relative, "' of ", dataset_->path());
}

absl::StatusOr<SourceItem> DatasetSourceReader::Read(uint64_t index, const SourceEntry& entry) {
  DDPIO_ASSIGN_OR_RETURN(storage::Record r, dataset_->ReadCopy(index));
  if (r.source_name != entry.relative || r.label != entry.label) {
    return absl::FailedPreconditionError(absl::StrCat("record ", index, " of ", dataset_->path(),
                                                      " changed while it was being converted"));
  }
  SourceItem item;
  item.original_width = static_cast<int>(r.original_width);
  item.original_height = static_cast<int>(r.original_height);
  if (r.type == storage::ContentType::kRawUint8) {
    if (r.channels != 3) {
      return absl::UnimplementedError(absl::StrCat("record ", index, " of ", dataset_->path(), " holds raw pixels with ",
                                                   r.channels, " channels; convert reads RGB (3) only"));
    }
    item.raw_width = static_cast<int>(r.width);
    item.raw_height = static_cast<int>(r.height);
  }
  item.bytes = std::move(r.payload);
  return item;
}

std::string UpgradingPath(const std::string& dataset) {
  return WithoutTrailingSlash(dataset) + ".upgrading";
}
std::string ReplacedPath(const std::string& dataset) { return WithoutTrailingSlash(dataset) + ".replaced"; }

absl::StatusOr<ConvertSummary> UpgradeInPlace(const std::string& dataset, ConvertOptions o, SourceListing* listing) {
  const std::string path = WithoutTrailingSlash(dataset);
  const std::string upgrading = UpgradingPath(path), replaced = ReplacedPath(path);
  std::error_code ec;
  const bool have_path = fs::exists(path, ec), have_upgrading = fs::exists(upgrading, ec),
             have_replaced = fs::exists(replaced, ec);
  if (!have_path && have_replaced && have_upgrading) {
    // The last run stopped between the two renames: its new dataset was complete.
    DDPIO_LOG(INFO) << "finishing the interrupted swap of " << upgrading << " into " << path;
    DDPIO_RETURN_IF_ERROR(Rename(upgrading, path));
    DDPIO_RETURN_IF_ERROR(RemoveOld(replaced));
    ConvertSummary done;
    done.already_complete = true;
    return done;
  }
  if (have_replaced) {
    if (!have_path) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is missing and ", replaced, " holds the dataset an upgrade replaced: move it back"));
    }
    // The last run stopped after the swap, before removing the old copy.
    DDPIO_RETURN_IF_ERROR(RemoveOld(replaced));
  }
  if (have_upgrading && !o.resume) {
    return absl::AlreadyExistsError(absl::StrCat(upgrading, " exists: an earlier upgrade of ", path,
                                                 " did not finish; pass --resume to continue it, or remove it"));
  }
  ConvertSummary summary;
  {
    DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(path));
    DDPIO_ASSIGN_OR_RETURN(*listing, ListDataset(*reader));
    DatasetSourceReader source(reader.get());
    o.out = upgrading;
    o.reader = &source;
    o.writer.single_file = fs::is_regular_file(path, ec);
    DDPIO_ASSIGN_OR_RETURN(summary, Convert(*listing, o));
  }
  DDPIO_ASSIGN_OR_RETURN(auto check, storage::DatasetReader::Open(upgrading));
  if (check->size() + summary.skipped.size() != listing->entries.size()) {
    return absl::DataLossError(absl::StrCat(upgrading, " holds ", check->size(), " records for the ",
                                            listing->entries.size(), " of ", path, "; not swapped in"));
  }
  check.reset();
  DDPIO_RETURN_IF_ERROR(Rename(path, replaced));
  DDPIO_RETURN_IF_ERROR(Rename(upgrading, path));
  DDPIO_RETURN_IF_ERROR(RemoveOld(replaced));
  return summary;
}

}  // namespace ddpio::tools
