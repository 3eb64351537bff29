// The record store of a dataset in an object store (record_store.h), over remote::RemoteDataset:
// fetched copies of the records, each held by the transaction that fetched it until its Reset.
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/environment.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/record_store.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/storage/store_settings.h"

namespace ddpio::storage::internal {
namespace {

// The store settings an open of an s3:// path uses: the options', else resolved once from the
// process environment (the one place the library reads it, for callers that did not), the
// options' explicit values winning either way; then given the caller's cancel flag and bounded by
// a job's timeout.
absl::StatusOr<StoreSettings> StoreSettingsFor(const ReaderOptions& options) {
  StoreSettings s;
  if (options.store_settings.has_value()) {
    s = *options.store_settings;
    ApplyStoreOverrides(options.store_overrides, &s);
  } else {
    DDPIO_ASSIGN_OR_RETURN(s, ResolveStoreSettings(CurrentEnvironment(), options.store_overrides));
  }
  if (options.cancel != nullptr) s.remote.retry.cancel = options.cancel;
  if (options.store_deadline.count() > 0) {
    const auto bound = [&](std::chrono::milliseconds& d) {
      if (d.count() == 0 || d > options.store_deadline) d = options.store_deadline;
    };
    bound(s.remote.retry.give_up_after);
    bound(s.remote.retry.attempt_timeout);
  }
  return s;
}

absl::Status NotLocatable(const std::string& url) {
  return absl::UnimplementedError(
      absl::StrCat(url, " is in an object store: its records are located by its own index"));
}

class RemoteStoreTxn final : public RecordStoreTxn {
 public:
  explicit RemoteStoreTxn(std::shared_ptr<remote::RemoteDataset> remote)
      : remote_(std::move(remote)) {}

  absl::StatusOr<StoredRecord> Read(uint64_t index) override {
    return Hold(index, remote_->Fetch(index));
  }
  absl::StatusOr<StoredRecord> Refetch(uint64_t index) override {
    return Hold(index, remote_->Refetch(index));
  }
  std::string Where(uint64_t index) const override { return remote_->Where(index); }
  // Nothing is mapped.
  absl::Status Finish(uint64_t, absl::Status status) override { return status; }
  absl::Status CheckMapped() const override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> Prefetch(absl::Span<const uint64_t> indices) override {
    return remote_->Prefetch(indices);
  }
  absl::StatusOr<remote::RecordLocation> Locate(uint64_t, absl::Span<const uint8_t>) override {
    return NotLocatable(remote_->url());
  }
  void Reset() override { held_.clear(); }

 private:
  // Record `index`'s fetched `bytes`, held until Reset; the store's error naming the record.
  absl::StatusOr<StoredRecord> Hold(uint64_t index,
                                    absl::StatusOr<std::shared_ptr<const std::string>> bytes) {
    if (!bytes.ok()) return Annotate(bytes.status(), RecordName(index, remote_->url()));
    const std::string& b = **bytes;
    held_.push_back(*std::move(bytes));
    return StoredRecord{
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()), b.size()),
        remote_->Binding(index), index, &remote_->url()};
  }

  std::shared_ptr<remote::RemoteDataset> remote_;
  // The records whose views are alive until Reset.
  std::vector<std::shared_ptr<const std::string>> held_;
};

class RemoteStore final : public RecordStore {
 public:
  explicit RemoteStore(std::shared_ptr<remote::RemoteDataset> remote) : remote_(std::move(remote)) {
    for (const remote::RemoteFile& f : remote_->manifest().files) file_bytes_ += f.bytes;
  }

  const std::string& path() const override { return remote_->url(); }
  bool no_lock() const override { return false; }
  std::vector<DatasetReader::DataFile> data_files() const override {
    std::vector<DatasetReader::DataFile> files;
    for (const remote::RemoteFile& f : remote_->manifest().files)
      files.push_back({path() + "/" + f.object, f.bytes});
    return files;
  }
  uint64_t file_bytes() const override { return file_bytes_; }
  size_t shard_count() const override { return 1; }
  const remote::RemoteDataset* remote() const override { return remote_.get(); }
  // Its bytes crossed a network or lay in a cache folder anyone may write, and a CRC costs
  // little next to either.
  bool fetches_copies() const override { return true; }
  absl::Status CheckLocatable() const override { return NotLocatable(path()); }
  absl::StatusOr<std::unique_ptr<RecordStoreTxn>> BeginRead() const override {
    return std::make_unique<RemoteStoreTxn>(remote_);
  }

 private:
  // Constant after open.
  std::shared_ptr<remote::RemoteDataset> remote_;
  uint64_t file_bytes_ = 0;
};

}  // namespace

absl::StatusOr<OpenedStore> OpenRemoteStore(const std::string& url, const ReaderOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(const StoreSettings store, StoreSettingsFor(options));
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<remote::RemoteDataset> remote,
                         remote::RemoteDataset::Open(url, store.s3, store.remote));
  OpenedStore opened;
  opened.header = remote->manifest().header;
  opened.completion = remote->manifest().completion;
  // Carried by the index of a token dataset's upload (checked at open); an older upload's none,
  // and DocumentLengths then reads every record.
  opened.document_lengths = remote->TakeDocumentLengths();
  opened.store = std::make_unique<RemoteStore>(std::move(remote));
  return opened;
}

absl::StatusOr<std::shared_ptr<const remote::RemoteIndexBytes>> FetchRemoteIndex(
    const std::string& url, const ReaderOptions& options) {
  if (!s3::IsS3Url(url)) {
    return absl::InvalidArgumentError(absl::StrCat(url, " is not a dataset in an object store"));
  }
  DDPIO_ASSIGN_OR_RETURN(const StoreSettings store, StoreSettingsFor(options));
  DDPIO_ASSIGN_OR_RETURN(remote::RemoteIndexBytes bytes,
                         remote::RemoteDataset::FetchIndex(url, store.s3, store.remote));
  return std::make_shared<const remote::RemoteIndexBytes>(std::move(bytes));
}

absl::StatusOr<DatasetReader::Summary> PeekRemoteStore(const std::string& url,
                                                       const ReaderOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(const StoreSettings store, StoreSettingsFor(options));
  remote::RemoteCounters counters;
  DDPIO_ASSIGN_OR_RETURN(remote::RemoteManifest m, remote::RemoteDataset::ReadManifest(
                                                       url, store.s3, store.remote, &counters));
  return DatasetReader::Summary{std::move(m.header), m.completion, counters};
}

}  // namespace ddpio::storage::internal
