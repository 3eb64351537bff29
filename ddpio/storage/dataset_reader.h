// DatasetReader: read-only, many-threaded access to a complete ddpio dataset.
//
// Opening checks the format name and version (FailedPrecondition for an unknown version or an
// incomplete dataset) and that the record count matches the completion marker. Reads go
// through ReadTxn objects, one per thread at a time; each returns zero-copy views into LMDB's
// memory map. Records are checksummed on every Get unless verify_checksums is off (CRC32C costs
// far less than the read; docs/PERFORMANCE.md).
//
// LMDB allows one environment per dataset per process, so readers of the same dataset in one
// process share one environment (opened with the first reader's options); a child of fork opens
// its own instead of using the one it inherited, which LMDB forbids. Thread-safe: the
// reader itself may be shared; a ReadTxn must be used by one thread at a time.
//
//   DDPIO_ASSIGN_OR_RETURN(auto reader, DatasetReader::Open("/data/train.lmdb", {}));
//   DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, reader->BeginRead());
//   DDPIO_ASSIGN_OR_RETURN(RecordView r, txn.Get(17));   // r.payload valid until txn.Reset()
//
// A file that becomes unreadable while mapped (truncated or replaced under the process, a corrupt
// file that sends LMDB past its end, failing storage) raises a bus error on the next read of its
// pages; the process does not die of it: the pages read as zeros, and every read of that file
// from then on — Get, Prefetch, CheckMapped, ReadCopy, Open — returns DataLoss naming the file,
// the byte and the likely cause (storage/internal/map_guard.h). Zeros are never returned as a
// record: a caller that keeps using a view after Get (decoding it, copying it) calls
// ReadTxn::CheckMapped after that use.
//
// A sharded dataset (a folder with kShardManifest and one dataset per shard, written by
// `ddpio convert --shards K`) opens the same way and reads as one: one index space, shard k
// holding the indices after those of shards 0..k-1, so the order is the unsharded order.
//
// Where the records lie — one LMDB file, a folder of shards, an object store — is a RecordStore
// (storage/internal/record_store.h) behind the reader; what every dataset shares (index bounds,
// decoding with the checksum and binding checks, the messages naming index, key and dataset) is
// done here, once.
#ifndef DDPIO_STORAGE_DATASET_READER_H_
#define DDPIO_STORAGE_DATASET_READER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/record.h"
#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/remote/remote_options.h"
#include "ddpio/storage/store_settings.h"

namespace ddpio::storage {

namespace internal {
class RecordStore;
class RecordStoreTxn;
}  // namespace internal
namespace remote {
class RemoteDataset;  // remote/remote_dataset.h, for what remote() returns
}  // namespace remote

// The file in a sharded dataset's folder that lists its shards (docs/FORMAT.md); written last,
// so a folder without it is an unfinished conversion.
inline constexpr char kShardManifest[] = "ddpio-shards.json";

struct ReaderOptions {
  // Verify each record's CRC32C on Get (default true). Off only for benchmarks that want the
  // bare read cost. A dataset in an object store verifies every record whatever this says: its
  // bytes come over the network or from a cache folder.
  bool verify_checksums = true;
  // OS readahead on the memory map (default false: random access to a dataset larger than RAM
  // wastes IO on readahead; turn it on for sequential scans of cold data).
  bool readahead = false;
  enum class Locking {
    kAuto,    // default: LMDB's reader lock; without write access to the lock file (read-only
              // media or directory), fall back to kNoLock and log it
    kLock,    // always lock; fail on read-only media
    kNoLock,  // never lock (MDB_NOLOCK): for read-only and shared filesystems. Safe because a
              // complete dataset is never written again; unsafe next to a running writer
  };
  Locking locking = Locking::kAuto;
  // Concurrent read transactions allowed (LMDB reader slots). Default 1024.
  unsigned max_readers = 1024;
  // --- A dataset in an object store (s3://BUCKET/PREFIX); not used for a local one ---
  // How to reach the store: its endpoint and credentials and the remote reader's options (memory
  // budget, request shaping, retries, the local cache folder and its budget; store_settings.h).
  // Given, they are used as they are and nothing is read from the environment — how a program
  // that resolved them at its edge (ResolveStoreSettings) passes them down. nullopt (the
  // default): Open and Peek of an s3:// path resolve them once per call, from the process
  // environment, as ResolveStoreSettings(CurrentEnvironment(), store_overrides) — the AWS tools'
  // variables and files, DDPIO_S3_CACHE_DIR, DDPIO_S3_CACHE_GB, DDPIO_S3_MEMORY_MB,
  // DDPIO_S3_COALESCE_KB, DDPIO_S3_OUTAGE_SECONDS, DDPIO_S3_MAX_IN_FLIGHT — so that every program
  // reads them the same way without code of its own.
  std::optional<StoreSettings> store_settings;
  // Explicit values: each one given wins over its variable, and over store_settings' value when
  // those are given too (an empty StoreOverrides, the default, leaves everything to the
  // settings, or to the environment and then the defaults).
  StoreOverrides store_overrides;
  // The longest any one request to an object store may take, retries included (0: no bound but
  // the settings' retry policy): a job's timeout, so that a rank riding out an outage does not
  // outlast the peers waiting for it. Bounds retry.give_up_after and the attempt timeout of the
  // settings, whether given or resolved.
  std::chrono::milliseconds store_deadline{0};
  // Not a setting: a flag another thread raises to give up (the store's requests end at once,
  // Cancelled) — a front end's answer to Ctrl-C while a dataset opens against a failing store.
  // Non-null, it replaces the settings' retry.cancel. Null (default): the settings' own.
  std::shared_ptr<const std::atomic<bool>> cancel;
};

class DatasetReader;
class SequencePlan;   // token_sequences.h
struct SequenceView;  // token_sequences.h

// A read snapshot. Move-only; use from one thread at a time.
class ReadTxn {
 public:
  ReadTxn(ReadTxn&&) noexcept;
  ReadTxn& operator=(ReadTxn&&) noexcept;
  ~ReadTxn();

  // A view of record `index`. Its source_name and payload point into the memory map and stay
  // valid until this ReadTxn is Reset, moved from or destroyed. InvalidArgument when index >=
  // size(); DataLoss for a missing, truncated or corrupt record, naming index, key and dataset,
  // and for any record of a file whose map has had a bus error (then naming the file, the byte
  // and the cause). With `stored`, also the record's bytes as stored (what DecodeRecord parses;
  // the group feeder sends them as they are), valid as long as the view.
  // With `binding`, also what the record is bound to (record.h: its file's salt and its key in
  // that file — for a shard, the key within the shard), so that a copy of `stored` sent elsewhere
  // can be checked there.
  absl::StatusOr<RecordView> Get(uint64_t index, absl::Span<const uint8_t>* stored = nullptr,
                                 RecordBinding* binding = nullptr);

  // OK unless a bus error has hit the dataset's map (sharded: the map of a shard this transaction
  // read since it was begun or last Reset): then DataLoss as Get's, without the record (the
  // caller knows which it used). Views from Get are read again by whoever uses them later
  // (decode, copy), and a page lost meanwhile reads as zeros: call this after the use and before
  // trusting its result. One atomic load per file.
  absl::Status CheckMapped() const;

  // Asks the OS to start reading these records now (MADV_WILLNEED over each record's pages, in
  // file order, adjacent ranges merged), so the Gets that follow find them in the page cache.
  // Without it a cold record is faulted in one page (4 KiB) at a time — on network or throttled
  // storage one IO per page instead of one per record, and one IO in flight per reading thread.
  // Returns the bytes hinted (page-rounded); costs a lookup per record when they are cached.
  // InvalidArgument for an index >= size(); DataLoss after a bus error in the map, as Get's; a
  // missing record is left to Get to report.
  absl::StatusOr<uint64_t> Prefetch(absl::Span<const uint64_t> indices);

  // Where record `index`'s stored bytes lie in the dataset's data files: the file's position in
  // DatasetReader::data_files(), the offset in it and the length; with `binding`, what the
  // record is bound to; with `stored`, its stored bytes (a view as Get's). The record is read and
  // checked as by Get (same errors). What an upload to an object store puts in the record index.
  // Local datasets only (Unimplemented for a remote one).
  absl::StatusOr<remote::RecordLocation> Locate(uint64_t index, RecordBinding* binding = nullptr,
                                                absl::Span<const uint8_t>* stored = nullptr);

  // Releases the snapshot (views die) but keeps the reader slot; the next Get renews it. Call
  // between batches so a long-lived reader does not pin old pages.
  void Reset();

 private:
  friend class DatasetReader;
  ReadTxn(const DatasetReader* reader, std::unique_ptr<internal::RecordStoreTxn> txn);
  const DatasetReader* reader_ = nullptr;
  std::unique_ptr<internal::RecordStoreTxn> txn_;  // null when moved from
};

class DatasetReader {
 public:
  // Opens the dataset at `path`: a directory with data.mdb, a single LMDB file, a sharded
  // dataset's folder, or s3://BUCKET/PREFIX — a dataset uploaded to an object store, read with
  // range GETs of whole records (remote/remote_dataset.h), every record checked as a local one,
  // with the store settings of `options` (resolved from the process environment once, here, when
  // it has none; see ReaderOptions::store_settings).
  // NotFound when nothing or no LMDB data is there; FailedPrecondition for a non-ddpio database, an
  // unsupported format version or an incomplete dataset; DataLoss when the record count
  // disagrees with the completion marker. For s3://, ResolveStoreSettings' errors too
  // (InvalidArgument naming a bad DDPIO_S3_* variable, FailedPrecondition without credentials).
  static absl::StatusOr<std::unique_ptr<DatasetReader>> Open(const std::string& path,
                                                             const ReaderOptions& options = {});
  // Which dataset is at `path`, without reading a record: its header and completion marker. In
  // an object store that is one GET (the manifest), where Open also fetches the record index:
  // what a rank that is fed by another needs. Errors as Open's.
  struct Summary {
    DatasetHeader header;
    DatasetCompletion completion;
    std::optional<remote::RemoteCounters> store;  // in an object store: the request(s) it took
  };
  static absl::StatusOr<Summary> Peek(const std::string& path, const ReaderOptions& options = {});
  // For a dataset in an object store: its manifest and record index as fetched (two GETs) and
  // checked — what one rank of a job fetches and gives every other, which then opens and peeks
  // without asking the store (store_overrides.preloaded_index). InvalidArgument for a path that
  // is not s3://; errors as Open's.
  static absl::StatusOr<std::shared_ptr<const remote::RemoteIndexBytes>> FetchStoreIndex(
      const std::string& path, const ReaderOptions& options = {});
  ~DatasetReader();
  DatasetReader(const DatasetReader&) = delete;
  DatasetReader& operator=(const DatasetReader&) = delete;

  const DatasetHeader& header() const { return header_; }
  const DatasetCompletion& completion() const { return completion_; }
  uint64_t size() const { return completion_.sample_count; }
  // A token dataset's ids per document, as its conversion recorded them (read at open: a few
  // metadata reads, no record touched); empty when not recorded (a dataset in an object store, or
  // images). DocumentLengths (below) falls back to reading every record.
  const std::vector<uint32_t>& recorded_document_lengths() const { return document_lengths_; }
  const std::string& path() const { return path_; }
  // Whether the environment was opened without LMDB's lock (kNoLock or the kAuto fallback).
  bool no_lock() const;
  // The size of the LMDB data file in bytes (summed over shards).
  uint64_t file_bytes() const { return file_bytes_; }
  // The LMDB data files (one per shard) and the bytes of each in use, for tools that measure
  // raw file reads.
  struct DataFile {
    std::string path;
    uint64_t bytes = 0;
  };
  std::vector<DataFile> data_files() const;
  // Shards: 1 for an unsharded dataset.
  size_t shard_count() const;
  // The object-store dataset behind an s3:// path (its counters, its manifest); null for a
  // local one.
  const remote::RemoteDataset* remote() const;

  // A new read transaction. Thread-safe. ResourceExhausted when all reader slots are taken.
  absl::StatusOr<ReadTxn> BeginRead() const;

  // An owning copy of record `index` (opens its own transaction). Errors as ReadTxn::Get.
  absl::StatusOr<Record> ReadCopy(uint64_t index) const;

 private:
  friend class ReadTxn;
  friend absl::StatusOr<std::unique_ptr<DatasetReader>> OpenSequences(
      std::vector<std::unique_ptr<DatasetReader>> documents,
      std::shared_ptr<const SequencePlan> plan, const SequenceView& view, bool verify);
  DatasetReader();

  // Constant after Open.
  std::string path_;
  DatasetHeader header_;
  DatasetCompletion completion_;
  std::vector<uint32_t> document_lengths_;
  uint64_t file_bytes_ = 0;
  // Whether Get checks each record's CRC32C: ReaderOptions::verify_checksums, or always for a
  // store whose records are fetched copies.
  bool verify_checksums_ = true;
  std::unique_ptr<internal::RecordStore> store_;
};

// A token dataset's ids per document: as recorded at conversion, else (a dataset in an object
// store, one converted before lengths were recorded) read from every record's payload size.
// FailedPrecondition for an image dataset; the record errors of ReadTxn::Get.
absl::StatusOr<std::vector<uint32_t>> DocumentLengths(const DatasetReader& reader);

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_DATASET_READER_H_
