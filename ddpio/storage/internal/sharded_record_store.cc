// The record store of a sharded dataset's folder (record_store.h): one LMDB store per shard,
// read as one dataset — one index space, shard k holding the indices after those of shards
// 0..k-1, so the order is the unsharded order.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/record_store.h"
#include "ddpio/storage/shards.h"

namespace ddpio::storage::internal {
namespace {

class ShardedStore final : public RecordStore {
 public:
  explicit ShardedStore(std::string path) : path_(std::move(path)) {}

  const std::string& path() const override { return path_; }
  bool no_lock() const override { return shards_[0]->no_lock(); }
  std::vector<DatasetReader::DataFile> data_files() const override {
    std::vector<DatasetReader::DataFile> files;
    for (const auto& shard : shards_) {
      for (DatasetReader::DataFile& f : shard->data_files()) files.push_back(std::move(f));
    }
    return files;
  }
  uint64_t file_bytes() const override { return file_bytes_; }
  size_t shard_count() const override { return shards_.size(); }
  const remote::RemoteDataset* remote() const override { return nullptr; }
  bool fetches_copies() const override { return false; }
  absl::Status CheckLocatable() const override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<RecordStoreTxn>> BeginRead() const override;

  // Adds the shard holding the next `records` indices.
  void Add(std::unique_ptr<RecordStore> shard, uint64_t records) {
    starts_.push_back(end_);
    end_ += records;
    file_bytes_ += shard->file_bytes();
    shards_.push_back(std::move(shard));
  }
  // The shard holding `index`.
  size_t ShardOf(uint64_t index) const {
    return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), index) -
                               starts_.begin()) -
           1;
  }
  // Messages about global record `index` start with this.
  std::string Name(uint64_t index) const { return absl::StrCat("record ", index, " of ", path_); }

 private:
  friend class ShardedStoreTxn;
  // Constant after open: the shards (LMDB stores), the first global index of each, the end of
  // the last, and their file bytes summed.
  std::string path_;
  std::vector<std::unique_ptr<RecordStore>> shards_;
  std::vector<uint64_t> starts_;
  uint64_t end_ = 0;
  uint64_t file_bytes_ = 0;
};

class ShardedStoreTxn final : public RecordStoreTxn {
 public:
  explicit ShardedStoreTxn(const ShardedStore& store)
      : store_(store), shards_(store.shards_.size()), is_touched_(store.shards_.size(), 0) {}

  absl::StatusOr<StoredRecord> Read(uint64_t index) override {
    uint64_t local = 0;
    DDPIO_ASSIGN_OR_RETURN(RecordStoreTxn * shard, Shard(index, nullptr, &local));
    return shard->Read(local);
  }
  absl::Status Finish(uint64_t index, absl::Status status) override {
    const size_t k = store_.ShardOf(index);
    // A shard whose transaction could not begin: its error as it is.
    if (shards_[k] == nullptr) return status;
    absl::Status st = shards_[k]->Finish(index - store_.starts_[k], std::move(status));
    if (!st.ok()) return Annotate(st, store_.Name(index));
    return st;
  }
  absl::Status CheckMapped() const override {
    for (size_t k : touched_) DDPIO_RETURN_IF_ERROR(shards_[k]->CheckMapped());
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> Prefetch(absl::Span<const uint64_t> indices) override;
  absl::StatusOr<remote::RecordLocation> Locate(uint64_t index,
                                                absl::Span<const uint8_t> stored) override {
    size_t k = 0;
    uint64_t local = 0;
    DDPIO_ASSIGN_OR_RETURN(RecordStoreTxn * shard, Shard(index, &k, &local));
    absl::StatusOr<remote::RecordLocation> where = shard->Locate(local, stored);
    if (!where.ok()) return Annotate(where.status(), store_.Name(index));
    where->file = static_cast<uint32_t>(k);
    return where;
  }
  void Reset() override {
    for (auto& shard : shards_) {
      if (shard != nullptr) shard->Reset();
    }
    for (size_t k : touched_) is_touched_[k] = 0;
    touched_.clear();
  }

 private:
  // The transaction of the shard holding global `index` (begun on first use), with the shard in
  // *shard (when given) and the index within it in *local; the shard counts as read from.
  absl::StatusOr<RecordStoreTxn*> Shard(uint64_t index, size_t* shard, uint64_t* local);

  const ShardedStore& store_;
  std::vector<std::unique_ptr<RecordStoreTxn>> shards_;  // null until first used
  // The shards read since the last Reset (whose views may be alive), each once.
  std::vector<size_t> touched_;
  std::vector<char> is_touched_;
};

absl::StatusOr<std::unique_ptr<RecordStoreTxn>> ShardedStore::BeginRead() const {
  return std::make_unique<ShardedStoreTxn>(*this);
}

absl::StatusOr<RecordStoreTxn*> ShardedStoreTxn::Shard(uint64_t index, size_t* shard,
                                                       uint64_t* local) {
  const size_t k = store_.ShardOf(index);
  if (shard != nullptr) *shard = k;
  if (shards_[k] == nullptr) {
    DDPIO_ASSIGN_OR_RETURN(shards_[k], store_.shards_[k]->BeginRead());
  }
  if (!is_touched_[k]) {
    is_touched_[k] = 1;
    touched_.push_back(k);
  }
  *local = index - store_.starts_[k];
  return shards_[k].get();
}

absl::StatusOr<uint64_t> ShardedStoreTxn::Prefetch(absl::Span<const uint64_t> indices) {
  std::vector<std::vector<uint64_t>> per_shard(shards_.size());
  for (uint64_t index : indices) {
    size_t k = 0;
    uint64_t local = 0;
    DDPIO_RETURN_IF_ERROR(Shard(index, &k, &local).status());
    per_shard[k].push_back(local);
  }
  uint64_t hinted = 0;
  for (size_t k = 0; k < per_shard.size(); ++k) {
    if (per_shard[k].empty()) continue;
    DDPIO_ASSIGN_OR_RETURN(uint64_t h, shards_[k]->Prefetch(per_shard[k]));
    hinted += h;
  }
  return hinted;
}

// A shard must be the one the manifest's place says, of this dataset: its header names its place
// and its dataset (format 3), and the manifest (version 2) its digest. A lying manifest — a path
// pointing at another shard of the dataset, a shard copied in from another dataset — is DataLoss
// naming the shard, before a record is read.
absl::Status CheckShardPlace(const std::string& shard_path, const OpenedStore& shard, size_t place,
                             const ShardManifest& manifest, const ShardEntry& entry,
                             const std::string& manifest_path) {
  const DatasetHeader& h = shard.header;
  const size_t count = manifest.shards.size();
  if (h.shard_count > 0) {
    if (h.shard_count != count || h.shard_index != place) {
      return absl::DataLossError(absl::StrCat(shard_path, " is shard ", h.shard_index, " of ",
                                              h.shard_count, " but ", manifest_path,
                                              " lists it as shard ", place, " of ", count,
                                              ": the manifest does not describe these shards"));
    }
    if (h.dataset_fingerprint != manifest.source_fingerprint) {
      return absl::DataLossError(absl::StrCat(
          shard_path, " belongs to another dataset (fingerprint ", h.dataset_fingerprint, ", ",
          manifest_path, " says ", manifest.source_fingerprint, ")"));
    }
  } else if (manifest.format_version >= 2) {
    return absl::DataLossError(
        absl::StrCat(shard_path,
                     " is not a shard of a sharded dataset (its header names no "
                     "place), but ",
                     manifest_path, " lists it as shard ", place));
  }
  if (!entry.digest.empty()) {
    const std::string digest = ContentDigest(h, shard.completion);
    if (digest != entry.digest) {
      return absl::DataLossError(absl::StrCat(shard_path, " has digest ", digest, " but ",
                                              manifest_path, " says ", entry.digest,
                                              ": it is not the shard that was written there"));
    }
  }
  return absl::OkStatus();
}

// The shard at `shard_path`, opened as an LMDB dataset. One that is itself a sharded dataset's
// folder is opened as one first (its own errors, as any open's) and then refused.
absl::StatusOr<OpenedStore> OpenShard(const std::string& shard_path, const ReaderOptions& options) {
  if (IsShardedDataset(shard_path)) {
    DDPIO_RETURN_IF_ERROR(OpenShardedStore(shard_path, options).status());
    return absl::DataLossError(
        absl::StrCat(shard_path, " is itself sharded: shards hold records, not shards"));
  }
  return OpenLmdbStore(shard_path, options);
}

// The sharded dataset's header: the first shard's, with the manifest's fingerprint, the source
// files of all shards and the newest format version among them.
DatasetHeader ShardedHeader(const std::vector<DatasetHeader>& shards,
                            const ShardManifest& manifest) {
  DatasetHeader header = shards[0];
  header.source_fingerprint = manifest.source_fingerprint;
  header.source_files = 0;
  for (const DatasetHeader& shard : shards) header.source_files += shard.source_files;
  for (const DatasetHeader& shard : shards) {
    header.format_version = std::max(header.format_version, shard.format_version);
  }
  return header;
}

}  // namespace

absl::StatusOr<OpenedStore> OpenShardedStore(const std::string& path,
                                             const ReaderOptions& options) {
  const std::string manifest_path = path + "/" + kShardManifest;
  // A manifest of 4096 shards is a few hundred KiB; refuse anything absurd (or a FIFO, a device)
  // before reading it.
  constexpr uint64_t kMaxManifestBytes = 16 << 20;
  DDPIO_ASSIGN_OR_RETURN(std::string text,
                         ReadRegularFile(manifest_path, kMaxManifestBytes, "shard manifest"));
  auto manifest = DecodeShardManifest(text);
  if (!manifest.ok()) return Annotate(manifest.status(), manifest_path);

  auto store = std::make_unique<ShardedStore>(path);
  OpenedStore opened;
  std::vector<DatasetHeader> headers;
  for (const ShardEntry& entry : manifest->shards) {
    const std::string shard_path = path + "/" + entry.path;
    DDPIO_ASSIGN_OR_RETURN(OpenedStore shard, OpenShard(shard_path, options));
    const uint64_t records = shard.completion.sample_count;
    if (records != entry.records) {
      return absl::DataLossError(absl::StrCat(shard_path, " holds ", records, " records but ",
                                              manifest_path, " says ", entry.records));
    }
    DDPIO_RETURN_IF_ERROR(
        CheckShardPlace(shard_path, shard, headers.size(), *manifest, entry, manifest_path));
    if (!headers.empty() && shard.header.classes != headers[0].classes) {
      return absl::DataLossError(absl::StrCat(shard_path, " names other classes than ",
                                              path + "/" + manifest->shards[0].path,
                                              ": the shards are not one dataset"));
    }
    opened.completion.sample_count += records;
    opened.completion.payload_bytes += shard.completion.payload_bytes;
    opened.completion.skipped += shard.completion.skipped;
    headers.push_back(std::move(shard.header));
    store->Add(std::move(shard.store), records);
  }
  opened.header = ShardedHeader(headers, *manifest);
  opened.store = std::move(store);
  return opened;
}

}  // namespace ddpio::storage::internal
