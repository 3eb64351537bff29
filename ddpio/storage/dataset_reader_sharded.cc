// DatasetReader::OpenSharded: a folder of shards read as one dataset (dataset_reader.h).
#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/shards.h"

namespace ddpio::storage {
namespace {

// A shard must be the one the manifest's place says, of this dataset: its header names its place
// and its dataset (format 3), and the manifest (version 2) its digest. A lying manifest — a path
// pointing at another shard of the dataset, a shard copied in from another dataset — is DataLoss
// naming the shard, before a record is read.
absl::Status CheckShardPlace(const DatasetReader& shard, size_t place,
                             const ShardManifest& manifest, const ShardEntry& entry,
                             const std::string& manifest_path) {
  const DatasetHeader& h = shard.header();
  const size_t count = manifest.shards.size();
  if (h.shard_count > 0) {
    if (h.shard_count != count || h.shard_index != place) {
      return absl::DataLossError(absl::StrCat(shard.path(), " is shard ", h.shard_index, " of ",
                                              h.shard_count, " but ", manifest_path,
                                              " lists it as shard ", place, " of ", count,
                                              ": the manifest does not describe these shards"));
    }
    if (h.dataset_fingerprint != manifest.source_fingerprint) {
      return absl::DataLossError(absl::StrCat(
          shard.path(), " belongs to another dataset (fingerprint ", h.dataset_fingerprint, ", ",
          manifest_path, " says ", manifest.source_fingerprint, ")"));
    }
  } else if (manifest.format_version >= 2) {
    return absl::DataLossError(
        absl::StrCat(shard.path(),
                     " is not a shard of a sharded dataset (its header names no "
                     "place), but ",
                     manifest_path, " lists it as shard ", place));
  }
  if (!entry.digest.empty()) {
    const std::string digest = ContentDigest(h, shard.completion());
    if (digest != entry.digest) {
      return absl::DataLossError(absl::StrCat(shard.path(), " has digest ", digest, " but ",
                                              manifest_path, " says ", entry.digest,
                                              ": it is not the shard that was written there"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::OpenSharded(
    const std::string& path, const ReaderOptions& options) {
  const std::string manifest_path = path + "/" + kShardManifest;
  // A manifest of 4096 shards is a few hundred KiB; refuse anything absurd (or a FIFO, a device)
  // before reading it.
  constexpr uint64_t kMaxManifestBytes = 16 << 20;
  DDPIO_ASSIGN_OR_RETURN(std::string text,
                         ReadRegularFile(manifest_path, kMaxManifestBytes, "shard manifest"));
  auto manifest = DecodeShardManifest(text);
  if (!manifest.ok()) return Annotate(manifest.status(), manifest_path);

  auto reader = std::unique_ptr<DatasetReader>(new DatasetReader());
  reader->path_ = path;
  reader->options_ = options;
  uint64_t start = 0;
  for (const ShardEntry& entry : manifest->shards) {
    const std::string shard_path = path + "/" + entry.path;
    DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<DatasetReader> shard, Open(shard_path, options));
    if (!shard->shards_.empty()) {
      return absl::DataLossError(
          absl::StrCat(shard_path, " is itself sharded: shards hold records, not shards"));
    }
    if (shard->size() != entry.records) {
      return absl::DataLossError(absl::StrCat(shard_path, " holds ", shard->size(), " records but ",
                                              manifest_path, " says ", entry.records));
    }
    DDPIO_RETURN_IF_ERROR(
        CheckShardPlace(*shard, reader->shards_.size(), *manifest, entry, manifest_path));
    if (!reader->shards_.empty() &&
        shard->header().classes != reader->shards_[0]->header().classes) {
      return absl::DataLossError(absl::StrCat(shard_path, " names other classes than ",
                                              reader->shards_[0]->path(),
                                              ": the shards are not one dataset"));
    }
    reader->shard_starts_.push_back(start);
    start += shard->size();
    reader->file_bytes_ += shard->file_bytes();
    reader->completion_.payload_bytes += shard->completion().payload_bytes;
    reader->completion_.skipped += shard->completion().skipped;
    reader->shards_.push_back(std::move(shard));
  }
  reader->completion_.sample_count = start;
  reader->header_ = reader->shards_[0]->header();
  reader->header_.source_fingerprint = manifest->source_fingerprint;
  reader->header_.source_files = 0;
  for (const auto& shard : reader->shards_)
    reader->header_.source_files += shard->header().source_files;
  for (const auto& shard : reader->shards_) {
    reader->header_.format_version =
        std::max(reader->header_.format_version, shard->header().format_version);
  }
  return reader;
}

}  // namespace ddpio::storage
