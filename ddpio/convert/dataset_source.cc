#include "ddpio/convert/dataset_source.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::convert {
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

// Whether `upgraded` is a complete upgrade of `original`: it opens (complete: the completion
// marker is there), holds every record of the original but those the upgrade skipped, and each
// of its records keeps its original's label and source name (what an upgrade preserves). OK, or
// why not — checked before anything is renamed or removed.
absl::Status CheckUpgradeOf(const std::string& upgraded, const std::string& original) {
  DDPIO_ASSIGN_OR_RETURN(auto up, storage::DatasetReader::Open(upgraded));
  DDPIO_ASSIGN_OR_RETURN(auto old, storage::DatasetReader::Open(original));
  DDPIO_ASSIGN_OR_RETURN(SourceListing before, ListDataset(*old));
  DDPIO_ASSIGN_OR_RETURN(SourceListing after, ListDataset(*up));
  if (after.entries.size() + up->completion().skipped != before.entries.size()) {
    return absl::DataLossError(absl::StrCat(upgraded, " holds ", after.entries.size(),
                                            " records and skipped ", up->completion().skipped,
                                            " of the ", before.entries.size(), " of ", original));
  }
  if (up->completion().skipped == 0) {
    for (size_t i = 0; i < before.entries.size(); ++i) {
      if (before.entries[i].relative != after.entries[i].relative ||
          before.entries[i].label != after.entries[i].label) {
        return absl::DataLossError(
            absl::StrCat("record ", i, " of ", upgraded, " is not record ", i, " of ", original,
                         " (", after.entries[i].relative, " vs ", before.entries[i].relative, ")"));
      }
    }
  }
  return absl::OkStatus();
}

// LMDB's lock file of a single-file dataset, left beside it under its old name by a rename.
void RemoveLockOf(const std::string& single_file) {
  std::error_code ec;
  fs::remove(single_file + "-lock", ec);
}

}  // namespace

absl::StatusOr<SourceListing> ListDataset(const storage::DatasetReader& dataset) {
  SourceListing listing;
  listing.kind = "ddpio-dataset";
  listing.root = dataset.path();
  const storage::DatasetHeader& h = dataset.header();
  if (storage::IsTokenDataset(h)) {
    return absl::InvalidArgumentError(
        absl::StrCat(dataset.path(),
                     " is a token dataset: rewriting a dataset upgrades images (restart "
                     "markers, binding); a token dataset has nothing to upgrade"));
  }
  listing.described = absl::StrCat(
      dataset.path(),
      h.source_kind.empty() ? "" : absl::StrCat(" (from ", h.source_kind, " ", h.source_path, ")"));
  listing.classes = h.classes;
  listing.entries.reserve(dataset.size());
  DDPIO_ASSIGN_OR_RETURN(storage::ReadTxn txn, dataset.BeginRead());
  for (uint64_t i = 0; i < dataset.size(); ++i) {
    DDPIO_ASSIGN_OR_RETURN(storage::RecordView r, txn.Get(i));
    listing.entries.push_back({std::string(r.source_name), r.label});
    DDPIO_RETURN_IF_ERROR(txn.CheckMapped());  // the name was copied out of the map after Get
    if (i % 4096 == 4095) txn.Reset();         // do not pin the pages of a whole scan
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
      return absl::UnimplementedError(absl::StrCat("record ", index, " of ", dataset_->path(),
                                                   " holds raw pixels with ", r.channels,
                                                   " channels; convert reads RGB (3) only"));
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
std::string ReplacedPath(const std::string& dataset) {
  return WithoutTrailingSlash(dataset) + ".replaced";
}

absl::StatusOr<ConvertSummary> UpgradeInPlace(const std::string& dataset, ConvertOptions o,
                                              SourceListing* listing,
                                              const ProgressCallback& progress) {
  const std::string path = WithoutTrailingSlash(dataset);
  const std::string upgrading = UpgradingPath(path), replaced = ReplacedPath(path);
  std::error_code ec;
  const bool have_path = fs::exists(path, ec), have_upgrading = fs::exists(upgrading, ec),
             have_replaced = fs::exists(replaced, ec);
  if (!have_path && have_replaced && have_upgrading) {
    // The last run stopped between the two renames, or someone moved things by hand: the new copy
    // replaces the original only if it is a complete upgrade of it — checked before any rename.
    if (absl::Status complete = CheckUpgradeOf(upgrading, replaced); !complete.ok()) {
      // The original goes back where it belongs (the only rename that cannot lose anything); the
      // incomplete copy stays for --resume.
      DDPIO_RETURN_IF_ERROR(Rename(replaced, path));
      return WithSetting(
          absl::FailedPreconditionError(absl::StrCat(
              upgrading, " is not a complete upgrade of ", path, " (", complete.message(),
              "); the original, found at ", replaced, ", is back at ", path,
              " and nothing was removed: run the upgrade again, resuming")),
          "resume");
    }
    DDPIO_LOG(INFO) << "finishing the interrupted swap of " << upgrading << " into " << path;
    DDPIO_RETURN_IF_ERROR(Rename(upgrading, path));
    RemoveLockOf(upgrading);
    DDPIO_RETURN_IF_ERROR(RemoveOld(replaced));
    RemoveLockOf(replaced);
    ConvertSummary done;
    done.source = done.out = dataset;
    done.already_complete = true;
    return done;
  }
  if (have_replaced) {
    if (!have_path) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is missing and ", replaced,
                       " holds the dataset an upgrade replaced: move it back"));
    }
    // The last run stopped after the swap, before removing the old copy.
    DDPIO_RETURN_IF_ERROR(RemoveOld(replaced));
  }
  if (have_upgrading && !o.resume) {
    return WithSetting(
        absl::AlreadyExistsError(absl::StrCat(upgrading, " exists: an earlier upgrade of ", path,
                                              " did not finish; resume it, or remove it")),
        "resume");
  }
  ConvertSummary summary;
  {
    DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(path));
    DDPIO_ASSIGN_OR_RETURN(*listing, ListDataset(*reader));
    DatasetSourceReader source(reader.get());
    o.out = upgrading;
    o.reader = &source;
    o.writer.single_file = fs::is_regular_file(path, ec);
    DDPIO_ASSIGN_OR_RETURN(summary, Convert(*listing, o, progress));
  }
  if (absl::Status complete = CheckUpgradeOf(upgrading, path); !complete.ok()) {
    return Annotate(complete, absl::StrCat(upgrading, " not swapped in"));
  }
  DDPIO_RETURN_IF_ERROR(Rename(path, replaced));
  DDPIO_RETURN_IF_ERROR(Rename(upgrading, path));
  RemoveLockOf(upgrading);  // a single-file dataset's lock file keeps the name it was made under
  DDPIO_RETURN_IF_ERROR(RemoveOld(replaced));
  summary.out = dataset;
  return summary;
}

}  // namespace ddpio::convert
