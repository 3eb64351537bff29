#include "ddpio/storage/dataset_reader.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/record_store.h"

namespace ddpio::storage {

using internal::RecordName;
using internal::StoredRecord;

namespace {

// InvalidArgument unless `index` names a record of `reader`.
absl::Status CheckIndex(const DatasetReader& reader, uint64_t index) {
  if (index < reader.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("record index ", index, " out of range [0, ",
                                                 reader.size(), ") of ", reader.path()));
}

// Parses `record` into *view, its CRC32C checked with `verify` — for a bound record starting
// from its binding, so that in a format-3 dataset it also proves the record is this key's of this
// file — and names the record in an error. Where the store's records are fetched copies, a copy
// that fails may be at fault rather than the stored record (a cached copy, the transfer): it is
// fetched once more from the source, every cached copy dropped, and checked again.
absl::Status DecodeStored(internal::RecordStoreTxn& txn, const internal::RecordStore& store,
                          bool verify, uint64_t index, absl::StatusOr<StoredRecord>& record,
                          RecordView* view) {
  absl::Status st = DecodeRecord(record->bytes, verify, view, &record->binding);
  if (st.ok()) return st;
  if (!store.fetches_copies()) return Annotate(st, RecordName(record->index, *record->dataset));
  record = txn.Refetch(index);
  if (!record.ok()) return record.status();
  st = DecodeRecord(record->bytes, /*verify_checksum=*/true, view, &record->binding);
  if (st.ok()) return st;
  return Annotate(st, absl::StrCat(RecordName(record->index, *record->dataset), ", as stored at ",
                                   txn.Where(index), " (fetched twice)"));
}

}  // namespace

ReadTxn::ReadTxn(const DatasetReader* reader, std::unique_ptr<internal::RecordStoreTxn> txn)
    : reader_(reader), txn_(std::move(txn)) {}
ReadTxn::ReadTxn(ReadTxn&&) noexcept = default;
ReadTxn& ReadTxn::operator=(ReadTxn&&) noexcept = default;
ReadTxn::~ReadTxn() = default;

void ReadTxn::Reset() {
  if (txn_ != nullptr) txn_->Reset();
}

absl::StatusOr<RecordView> ReadTxn::Get(uint64_t index, absl::Span<const uint8_t>* stored,
                                        RecordBinding* binding) {
  if (txn_ == nullptr) return absl::FailedPreconditionError("Get on a moved-from ReadTxn");
  DDPIO_RETURN_IF_ERROR(CheckIndex(*reader_, index));
  RecordView view;
  absl::StatusOr<StoredRecord> record = txn_->Read(index);
  absl::Status st = record.status();
  if (st.ok()) {
    st = DecodeStored(*txn_, *reader_->store_, reader_->verify_checksums_, index, record, &view);
  }
  // The store's word once the bytes were used: a map that had a bus error meanwhile read as
  // zeros, and whatever was made of them gives way to that.
  st = txn_->Finish(index, std::move(st));
  if (!st.ok()) return st;
  if (stored != nullptr) *stored = record->bytes;
  if (binding != nullptr) *binding = record->binding;
  return view;
}

absl::StatusOr<remote::RecordLocation> ReadTxn::Locate(uint64_t index, RecordBinding* binding,
                                                       absl::Span<const uint8_t>* stored_out) {
  if (txn_ == nullptr) return absl::FailedPreconditionError("Locate on a moved-from ReadTxn");
  DDPIO_RETURN_IF_ERROR(reader_->store_->CheckLocatable());
  absl::Span<const uint8_t> stored;
  DDPIO_RETURN_IF_ERROR(Get(index, &stored, binding).status());
  DDPIO_ASSIGN_OR_RETURN(remote::RecordLocation where, txn_->Locate(index, stored));
  if (stored_out != nullptr) *stored_out = stored;
  return where;
}

absl::Status ReadTxn::CheckMapped() const {
  if (txn_ == nullptr) return absl::OkStatus();  // nothing read, nothing to check
  return txn_->CheckMapped();
}

absl::StatusOr<uint64_t> ReadTxn::Prefetch(absl::Span<const uint64_t> indices) {
  if (txn_ == nullptr) return absl::FailedPreconditionError("Prefetch on a moved-from ReadTxn");
  for (uint64_t index : indices) DDPIO_RETURN_IF_ERROR(CheckIndex(*reader_, index));
  return txn_->Prefetch(indices);
}

// ---------------------------------------------------------------------------------------------

DatasetReader::DatasetReader() = default;
DatasetReader::~DatasetReader() = default;

bool DatasetReader::no_lock() const { return store_->no_lock(); }
std::vector<DatasetReader::DataFile> DatasetReader::data_files() const {
  return store_->data_files();
}
size_t DatasetReader::shard_count() const { return store_->shard_count(); }
const remote::RemoteDataset* DatasetReader::remote() const { return store_->remote(); }

absl::StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::Open(const std::string& path,
                                                                   const ReaderOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(internal::OpenedStore opened, internal::OpenRecordStore(path, options));
  auto reader = std::unique_ptr<DatasetReader>(new DatasetReader());
  reader->path_ = opened.store->path();
  reader->header_ = std::move(opened.header);
  reader->completion_ = opened.completion;
  reader->document_lengths_ = std::move(opened.document_lengths);
  reader->file_bytes_ = opened.store->file_bytes();
  reader->verify_checksums_ = options.verify_checksums || opened.store->fetches_copies();
  reader->store_ = std::move(opened.store);
  return reader;
}

absl::StatusOr<DatasetReader::Summary> DatasetReader::Peek(const std::string& path,
                                                           const ReaderOptions& options) {
  return internal::PeekRecordStore(path, options);
}

absl::StatusOr<std::shared_ptr<const remote::RemoteIndexBytes>> DatasetReader::FetchStoreIndex(
    const std::string& path, const ReaderOptions& options) {
  return internal::FetchRemoteIndex(path, options);
}

absl::StatusOr<ReadTxn> DatasetReader::BeginRead() const {
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<internal::RecordStoreTxn> txn, store_->BeginRead());
  return ReadTxn(this, std::move(txn));
}

absl::StatusOr<Record> DatasetReader::ReadCopy(uint64_t index) const {
  DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, BeginRead());
  DDPIO_ASSIGN_OR_RETURN(RecordView view, txn.Get(index));
  Record copy = Record::FromView(view);
  // The copy read the map again: a page lost since Get verified it read as zeros.
  absl::Status mapped = txn.CheckMapped();
  if (!mapped.ok()) return Annotate(mapped, RecordName(index, path_));
  return copy;
}

absl::StatusOr<std::vector<uint32_t>> DocumentLengths(const DatasetReader& reader) {
  const int width = reader.header().tokens.width;
  if (width == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(reader.path(), " is an image dataset: it has no documents of token ids"));
  }
  if (!reader.recorded_document_lengths().empty() || reader.size() == 0)
    return reader.recorded_document_lengths();
  std::vector<uint32_t> lengths;
  lengths.reserve(reader.size());
  DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, reader.BeginRead());
  for (uint64_t i = 0; i < reader.size(); ++i) {
    DDPIO_ASSIGN_OR_RETURN(RecordView view, txn.Get(i));
    lengths.push_back(static_cast<uint32_t>(view.payload.size() / static_cast<size_t>(width)));
    txn.Reset();
  }
  return lengths;
}

}  // namespace ddpio::storage
