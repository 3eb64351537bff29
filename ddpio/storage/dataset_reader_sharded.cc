// DatasetReader::OpenSharded: a folder of shards read as one dataset (dataset_reader.h).
#include <algorithm>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/shards.h"

namespace ddpio::storage {

absl::StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::OpenSharded(
    const std::string& path, const ReaderOptions& options) {
  const std::string manifest_path = path + "/" + kShardManifest;
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, manifest_path);
  std::string text;
  // A manifest of 4096 shards is a few hundred KiB; refuse anything absurd before reading it.
  constexpr std::streamsize kMaxManifestBytes = 16 << 20;
  text.resize(kMaxManifestBytes + 1);
  in.read(text.data(), kMaxManifestBytes + 1);
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<std::streamsize>(text.size()) > kMaxManifestBytes) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, " is larger than ", kMaxManifestBytes, " bytes"));
  }
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
