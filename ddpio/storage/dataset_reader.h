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
#ifndef DDPIO_STORAGE_DATASET_READER_H_
#define DDPIO_STORAGE_DATASET_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/record.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/storage/remote/remote_format.h"

namespace ddpio::storage {

namespace internal {
struct SharedEnv;
}

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
  // A dataset in an object store (s3://BUCKET/PREFIX): its memory budget, request shaping and
  // local cache folder (remote/remote_dataset.h). Credentials and endpoint come from the
  // environment, as for the AWS tools (s3/s3_config.h); so may the cache: DDPIO_S3_CACHE_DIR
  // (when cache_dir is empty) and DDPIO_S3_CACHE_GB (its budget, default 16); DDPIO_S3_COALESCE_KB
  // sets coalesce_gap (KiB, default 64), DDPIO_S3_MEMORY_MB memory_bytes (MiB, default 256),
  // DDPIO_S3_OUTAGE_SECONDS how long a failing store is retried (retry.give_up_after, default 300).
  remote::RemoteOptions remote;
  // The object store's endpoint and credentials; nullopt (the default): from the environment, as
  // the AWS tools read it (s3/s3_config.h). Given, the environment's AWS_* are not read — how a
  // test reaches its in-memory store (an endpoint memory://NAME, s3/object_store.h).
  std::optional<s3::S3Config> store;
  // The longest any one request to an object store may take, retries included (0: no bound but
  // remote.retry's): a job's timeout, so that a rank riding out an outage does not outlast the
  // peers waiting for it. Bounds retry.give_up_after and the attempt timeout.
  std::chrono::milliseconds store_deadline{0};
};

class DatasetReader;

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
  struct Impl;
  explicit ReadTxn(std::unique_ptr<Impl> impl);
  absl::StatusOr<uint64_t> PrefetchShards(absl::Span<const uint64_t> indices);
  absl::StatusOr<RecordView> GetRemote(uint64_t index, absl::Span<const uint8_t>* stored,
                                       RecordBinding* binding);
  std::unique_ptr<Impl> impl_;
};

class DatasetReader {
 public:
  // Opens the dataset at `path`: a directory with data.mdb, a single LMDB file, a sharded
  // dataset's folder, or s3://BUCKET/PREFIX — a dataset uploaded to an object store, read with
  // range GETs of whole records (remote/remote_dataset.h), every record checked as a local one.
  // NotFound when nothing or no LMDB data is there; FailedPrecondition for a non-ddpio database, an
  // unsupported format version or an incomplete dataset; DataLoss when the record count
  // disagrees with the completion marker.
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
  ~DatasetReader();
  DatasetReader(const DatasetReader&) = delete;
  DatasetReader& operator=(const DatasetReader&) = delete;

  const DatasetHeader& header() const { return header_; }
  const DatasetCompletion& completion() const { return completion_; }
  uint64_t size() const { return completion_.sample_count; }
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
  size_t shard_count() const { return shards_.empty() ? 1 : shards_.size(); }
  // The object-store dataset behind an s3:// path (its counters, its manifest); null for a
  // local one.
  const remote::RemoteDataset* remote() const { return remote_.get(); }

  // A new read transaction. Thread-safe. ResourceExhausted when all reader slots are taken.
  absl::StatusOr<ReadTxn> BeginRead() const;

  // An owning copy of record `index` (opens its own transaction). Errors as ReadTxn::Get.
  absl::StatusOr<Record> ReadCopy(uint64_t index) const;

 private:
  friend class ReadTxn;
  DatasetReader() = default;
  absl::StatusOr<ReadTxn*> ShardTxn(ReadTxn::Impl& impl, uint64_t index, size_t* shard,
                                    uint64_t* local) const;
  static absl::StatusOr<std::unique_ptr<DatasetReader>> OpenSharded(const std::string& path,
                                                                    const ReaderOptions& options);
  static absl::StatusOr<std::unique_ptr<DatasetReader>> OpenRemote(const std::string& url,
                                                                   const ReaderOptions& options);

  // Constant after Open.
  std::shared_ptr<internal::SharedEnv> env_;
  std::string path_;
  ReaderOptions options_;
  DatasetHeader header_;
  DatasetCompletion completion_;
  uint64_t file_bytes_ = 0;
  std::string data_file_;
  // Format 3: records are bound to their keys with this salt (RecordSalt of the header).
  RecordBinding binding_;
  // Sharded: a reader per shard and the first global index of each (env_ is then null).
  std::vector<std::unique_ptr<DatasetReader>> shards_;
  std::vector<uint64_t> shard_starts_;
  // In an object store: every read goes here (env_ is then null, shards_ empty).
  std::shared_ptr<remote::RemoteDataset> remote_;
};

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_DATASET_READER_H_
