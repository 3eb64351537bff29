// RecordStore: where a DatasetReader's records are stored, behind one seam. Private to storage/.
//
// A store hands out a record's bytes as stored and what they are bound to; DatasetReader and
// ReadTxn (dataset_reader.h) do everything every store shares — index bounds, decoding with the
// CRC32C and binding checks, the messages naming index, key and dataset — in one place. Three
// stores, each in a file of its own:
//   - a local LMDB file (lmdb_record_store.cc): zero-copy views into the memory map, guarded
//     against bus errors (map_guard.h);
//   - a sharded dataset's folder (sharded_record_store.cc): one LMDB store per shard, shard k
//     holding the indices after those of shards 0..k-1;
//   - a dataset in an object store (remote_record_store.cc, over remote::RemoteDataset): fetched
//     copies of the records.
//
// A store is constant after its open and may be shared by threads; a RecordStoreTxn is used by
// one thread at a time.
#ifndef DDPIO_STORAGE_INTERNAL_RECORD_STORE_H_
#define DDPIO_STORAGE_INTERNAL_RECORD_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/record.h"
#include "ddpio/storage/remote/remote_format.h"

namespace ddpio::storage::internal {

// How every message names a record: "record INDEX (key KEY) of DATASET".
std::string RecordName(uint64_t index, const std::string& dataset);

// One record as its store holds it: what ReadTxn::Get decodes and checks.
struct StoredRecord {
  // The record's bytes as stored (what DecodeRecord parses), owned by the transaction that read
  // them: valid until its Reset or destruction.
  absl::Span<const uint8_t> bytes;
  // What the record is bound to: its file's salt and its key in that file.
  RecordBinding binding;
  // How messages name it (RecordName): its index in `dataset`, the path of the dataset whose file
  // holds it — for a shard's record, the index within the shard and the shard's path. `dataset`
  // is owned by the store.
  uint64_t index = 0;
  const std::string* dataset = nullptr;
};

// A read transaction of one store, held by pointer (ReadTxn). The caller has checked every index
// against the dataset's size. Used by one thread at a time; not used after its store is gone
// (destroying it then is safe).
class RecordStoreTxn {
 public:
  virtual ~RecordStoreTxn() = default;

  // Record `index` as stored. The store's own errors, each naming the record: DataLoss for a
  // missing record or one that cannot be its (outside its file, in a map that has had a bus
  // error), LMDB's errors, the object store's.
  virtual absl::StatusOr<StoredRecord> Read(uint64_t index) = 0;

  // What a Get of record `index` returns once its bytes were used (decoded), given `status` (the
  // read's error, the decode's, or OK): `status`, unless the store has a later word — DataLoss
  // when the map the bytes lie in had a bus error meanwhile (its zeros are never a record,
  // whatever was made of them) — and, for a shard's record, with the sharded dataset's name
  // before the error.
  virtual absl::Status Finish(uint64_t index, absl::Status status) = 0;

  // Only for a store that fetches copies (RecordStore::fetches_copies): record `index` fetched
  // afresh from its source, every cached copy dropped, after the copy Read gave failed to decode;
  // errors as Read's. And where the record lies in the source, for the error of one that fails
  // twice ("s3://bucket/prefix/data.mdb bytes 4096-9999"). The defaults (other stores are never
  // asked): Unimplemented, and "".
  virtual absl::StatusOr<StoredRecord> Refetch(uint64_t index);
  virtual std::string Where(uint64_t index) const;

  // OK unless a map this transaction read since it was begun or last Reset has had a bus error:
  // then DataLoss naming the file, the byte and the cause. OK for a store that maps nothing.
  virtual absl::Status CheckMapped() const = 0;

  // Starts reading these records ahead: the bytes hinted or asked for; errors as
  // ReadTxn::Prefetch's but the index range.
  virtual absl::StatusOr<uint64_t> Prefetch(absl::Span<const uint64_t> indices) = 0;

  // Where record `index`, whose stored bytes a Get of this transaction returned as `stored`,
  // lies in the store's data files (RecordStore::data_files). Only for a store whose
  // CheckLocatable is OK.
  virtual absl::StatusOr<remote::RecordLocation> Locate(uint64_t index,
                                                        absl::Span<const uint8_t> stored) = 0;

  // Releases what keeps the records read so far (views die); keeps what is needed to read again.
  virtual void Reset() = 0;
};

// A dataset's storage: the facts its open found, and read transactions.
class RecordStore {
 public:
  virtual ~RecordStore() = default;

  // The dataset's path as messages name it (for an object store, its normalised URL).
  virtual const std::string& path() const = 0;
  // Whether LMDB's reader lock is off (ReaderOptions::Locking); false where nothing is locked.
  virtual bool no_lock() const = 0;
  // The data files (one per LMDB file, one per object in a store) and the bytes of each, and
  // their sum.
  virtual std::vector<DatasetReader::DataFile> data_files() const = 0;
  virtual uint64_t file_bytes() const = 0;
  // 1 unless the dataset is sharded.
  virtual size_t shard_count() const = 0;
  // The object-store dataset behind the store; null for local files.
  virtual const remote::RemoteDataset* remote() const = 0;
  // Whether its records are fetched copies (over a network, or from a cache folder anyone may
  // write) rather than the stored bytes: then every record is verified whatever
  // ReaderOptions::verify_checksums says, and one that fails is fetched again (Refetch), once,
  // before its error stands.
  virtual bool fetches_copies() const = 0;
  // OK when its records lie in local data files ReadTxn::Locate can point into; else
  // Unimplemented saying why.
  virtual absl::Status CheckLocatable() const = 0;

  // A new read transaction. Thread-safe. ResourceExhausted when all reader slots are taken.
  virtual absl::StatusOr<std::unique_ptr<RecordStoreTxn>> BeginRead() const = 0;
};

// What opening a dataset's storage finds: the store, and the dataset it holds.
struct OpenedStore {
  std::unique_ptr<RecordStore> store;
  DatasetHeader header;
  DatasetCompletion completion;
  // A token dataset's document lengths when its file records them (TokenLengthsKey), else empty.
  std::vector<uint32_t> document_lengths;
};

// Opens the storage at `path` as DatasetReader::Open describes (errors as its): an s3:// URL in
// an object store, a folder with kShardManifest as a sharded dataset, anything else as one LMDB
// file.
absl::StatusOr<OpenedStore> OpenRecordStore(const std::string& path, const ReaderOptions& options);
// Which dataset is at `path` without reading a record (DatasetReader::Peek): in an object store
// from its manifest alone, elsewhere as opened.
absl::StatusOr<DatasetReader::Summary> PeekRecordStore(const std::string& path,
                                                       const ReaderOptions& options);
// Whether `path` is a sharded dataset's folder (a directory holding kShardManifest).
bool IsShardedDataset(const std::string& path);

// The stores, each in a file of its own.
absl::StatusOr<OpenedStore> OpenLmdbStore(const std::string& path, const ReaderOptions& options);
absl::StatusOr<OpenedStore> OpenShardedStore(const std::string& path, const ReaderOptions& options);
absl::StatusOr<OpenedStore> OpenRemoteStore(const std::string& url, const ReaderOptions& options);
// The dataset at s3:// `url` from its manifest alone (DatasetReader::Peek).
absl::StatusOr<DatasetReader::Summary> PeekRemoteStore(const std::string& url,
                                                       const ReaderOptions& options);
// The manifest and index of the dataset at s3:// `url` (DatasetReader::FetchStoreIndex).
absl::StatusOr<std::shared_ptr<const remote::RemoteIndexBytes>> FetchRemoteIndex(
    const std::string& url, const ReaderOptions& options);

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_RECORD_STORE_H_
