// RemoteDataset: a dataset in an S3-compatible object store (remote_format.h), read record by
// record with HTTP range GETs. Opening fetches the manifest and the record index (a prefix
// without a manifest is an unfinished upload: FailedPrecondition). Records asked for ahead
// (Prefetch: the sampler knows the order) are fetched in the background, neighbouring ones
// coalesced into one GET, many GETs in flight on one thread; Fetch returns a record's stored
// bytes, waiting for its GET if it is on the way, fetching it at once if nobody asked before.
// Fetched records stay in memory up to a byte budget and, with a cache folder, on local disk up
// to another (see RecordCache): a second epoch reads the disk. In memory, records already served
// go first (least recently served first: an epoch uses each record once), then the chunk mates of
// records asked for (below) not asked for themselves yet, records fetched ahead and not yet asked
// for last; and Prefetch asks for no more than the budget holds, so a window
// larger than the budget is fetched as it is consumed, never fetched twice.
// Records in the folder are neither fetched ahead nor held in memory: Fetch reads each in the
// thread that asks (as near as memory, and the buffers freed after use are reused).
// Chunks: the records are grouped, in index order, into runs one GET reaches (neighbours in one
// file, each within coalesce_gap of the others' bytes, at most max_request_bytes in all). When the
// whole dataset fits the budget that keeps it (RemoteOptions::whole_chunks), a record asked for
// brings its whole chunk: about one GET per chunk for an epoch in any order. So it does whatever
// the dataset's size when the sample order keeps to a few chunks at a time
// (RemoteOptions::chunk_order_records, the block order).
//
// Processes sharing a cache folder (the ranks of a node given the same --cache-dir) fetch each
// chunk once between them: whoever first needs a chunk claims it (RecordCache's claims) and fetches
// it into the folder; the others leave it to that process, and read its records from the folder
// when it is done (a Fetch that finds the chunk claimed waits for the claim). A claim dies with its
// process, so a killed fetcher costs its peers a GET, never a hang.
//
// The caller verifies what it gets (DatasetReader decodes every record with its CRC32C bound to
// its key and dataset); on a mismatch Refetch drops every cached copy and fetches the record from
// the store again, once — so a corrupt cache file heals and a corrupt stored record is named.
//
// A token dataset's index may carry each document's length (remote_format.h, version 4): checked
// at open, and handed on by TakeDocumentLengths, so that nobody fetches a record to count them.
//
// Thread-safe but for TakeDocumentLengths. Counters say what the store was asked and what the
// caches answered.
#ifndef DDPIO_STORAGE_REMOTE_REMOTE_DATASET_H_
#define DDPIO_STORAGE_REMOTE_REMOTE_DATASET_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/storage/record.h"
#include "ddpio/storage/remote/record_cache.h"
#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/remote/remote_options.h"
#include "ddpio/storage/s3/http_client.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::storage::s3 {
class ObjectStore;
}

namespace ddpio::storage::remote {

class RemoteDataset {
 public:
  // `url`: s3://BUCKET/PREFIX. Configuration from `config`. NotFound when there is nothing at the
  // prefix; FailedPrecondition for an unfinished upload; errors of the store name the object.
  static absl::StatusOr<std::shared_ptr<RemoteDataset>> Open(const std::string& url,
                                                             const s3::S3Config& config,
                                                             const RemoteOptions& options = {});
  // The manifest alone (one GET): what a rank that reads no record needs to know which dataset
  // this is. Errors as Open's.
  // `counters`, when given, gets the requests that took.
  static absl::StatusOr<RemoteManifest> ReadManifest(const std::string& url,
                                                     const s3::S3Config& config,
                                                     const RemoteOptions& options = {},
                                                     RemoteCounters* counters = nullptr);
  // The manifest's and the index's bytes (two GETs), the index checked against its manifest: what
  // one rank fetches for every rank of a job (RemoteOptions::preloaded). Errors as Open's.
  static absl::StatusOr<RemoteIndexBytes> FetchIndex(const std::string& url,
                                                     const s3::S3Config& config,
                                                     const RemoteOptions& options = {});
  ~RemoteDataset();
  RemoteDataset(const RemoteDataset&) = delete;
  RemoteDataset& operator=(const RemoteDataset&) = delete;

  const RemoteManifest& manifest() const { return manifest_; }
  // The document lengths the index carries (a token dataset's, manifest version 4: ids per record,
  // each held at open to fit its record and their sum to the completion marker's payload bytes),
  // moved out: empty when it carries none, or once taken. For the opener that hands them on
  // (OpenRemoteStore: DatasetReader::recorded_document_lengths), before the dataset is shared.
  std::vector<uint32_t> TakeDocumentLengths() { return std::exchange(document_lengths_, {}); }
  const std::string& url() const { return url_; }
  uint64_t size() const { return index_.size(); }
  // The chunks (see above): chunk c holds records [chunk_begin(c), chunk_begin(c + 1)).
  uint64_t chunk_count() const { return chunk_begin_.size() - 1; }
  uint64_t chunk_begin(uint64_t c) const { return chunk_begin_[c]; }
  // Whether a record asked for brings its whole chunk (whole_chunks, and the dataset fits or
  // the order keeps to a few chunks: chunk_order_records).
  bool fetches_whole_chunks() const { return whole_chunks_; }

  // Record `index`'s stored bytes. InvalidArgument past the end; the store's error otherwise.
  // In the block order with a dataset larger than the cache folder's budget, the record leaves
  // the folder once returned (RemoteOptions::chunk_order_records).
  absl::StatusOr<std::shared_ptr<const std::string>> Fetch(uint64_t index);
  // Drops every cached copy of `index` and fetches it from the store.
  absl::StatusOr<std::shared_ptr<const std::string>> Refetch(uint64_t index);
  // Starts fetching these records unless held or on the way. The bytes asked for.
  uint64_t Prefetch(absl::Span<const uint64_t> indices);

  // What record `index` is bound to, and how messages name its bytes in the store
  // ("s3://bucket/prefix/data.mdb bytes 4096-9999").
  RecordBinding Binding(uint64_t index) const;
  std::string Where(uint64_t index) const;
  RemoteCounters counters() const;

  // What the store itself allows, for benchmarks: these records fetched by one range GET each,
  // as many in flight as this dataset's client keeps (its window: max_in_flight up to
  // in_flight_limit), by a client of their own; nothing
  // checked, held or counted. The bytes received; InvalidArgument past the end (before any GET);
  // the first error of the store otherwise.
  absl::StatusOr<uint64_t> FetchRaw(absl::Span<const uint64_t> indices) const;
  // The same for whole chunks: every record, a GET per chunk as the block order's reader cuts
  // them with order chunks of `records_per_get` records (MakeChunkTable: never across a
  // multiple of it or a file, at most RemoteOptions::kMaxOrderChunkBytes): the store's bulk rate
  // for the GETs the block order sends, nothing decoded. InvalidArgument for 0.
  absl::StatusOr<uint64_t> FetchRawChunks(uint64_t records_per_get) const;

 private:
  struct Slot {
    std::shared_ptr<const std::string> bytes;  // null while pending
    bool pending = false;
    bool ahead = false;  // asked for by Prefetch and not served yet (counted in ahead_bytes_)
    bool mate = false;   // fetched with a record of its chunk, not asked for nor served yet
    uint64_t asked = 0;  // the last Prefetch call that asked for it
    std::list<uint64_t>::iterator place;  // in ahead_, mates_ or served_, once it has bytes
  };
  RemoteDataset() = default;
  // InvalidArgument naming the dataset for an index past the end.
  absl::Status CheckIndex(uint64_t index) const;
  // Fetches the manifest of the dataset at url_ with client_ (NotFound for no dataset,
  // FailedPrecondition for an unfinished upload).
  absl::StatusOr<std::string> FetchManifest(const s3::S3Url& where);
  // Fetches the manifest and the index, and checks the index against the manifest.
  absl::StatusOr<RemoteIndexBytes> FetchIndexBytes(const s3::S3Url& where);
  // Decodes the manifest `text` into manifest_.
  absl::Status DecodeManifest(const s3::S3Url& where, const std::string& text);
  // A client of the store for this dataset, as `options` say.
  static absl::StatusOr<std::unique_ptr<s3::ObjectStore>> MakeClient(const s3::S3Config& config,
                                                                     const RemoteOptions& options);
  // Fetch but for the eviction of what it serves.
  absl::StatusOr<std::shared_ptr<const std::string>> FetchAny(uint64_t index);
  absl::StatusOr<std::shared_ptr<const std::string>> FetchNow(uint64_t index);
  // With mu_ held: keeps `bytes` as record `index`'s, then evicts down to the budget (served
  // records first, least recently served first; then the oldest fetched ahead).
  void HoldLocked(uint64_t index, std::shared_ptr<const std::string> bytes);
  // With mu_ held: the held record of `it` is being returned to a caller.
  std::shared_ptr<const std::string> ServeLocked(std::unordered_map<uint64_t, Slot>::iterator it);
  // With mu_ held, when records fetched ahead fill the budget: those held but not asked for in
  // the last kStalePrefetchCalls calls (a window left behind by a loop that stopped early, a
  // rank's share that moved on) no longer count as ahead, and are the first evicted.
  static constexpr uint64_t kStalePrefetchCalls = 16;
  void DemoteStaleLocked();
  // The list a held slot is in.
  std::list<uint64_t>& ListOf(const Slot& slot);
  // With mu_ held: forgets a slot (held or pending) and what it counted.
  void DropLocked(std::unordered_map<uint64_t, Slot>::iterator it);
  // Groups the records into chunks and decides whether whole chunks are fetched.
  void MakeChunks();
  // With mu_ held: the records of the chunks of `wanted` that nobody holds or asked for, each
  // chunk once, marked pending (not ahead: they take no room from records asked for).
  std::vector<uint64_t> ChunkMatesLocked(const std::vector<uint64_t>& wanted);
  // Whether chunks are shared with other processes through the cache folder.
  bool SharesChunks() const { return whole_chunks_ && disk_ != nullptr; }
  using Claims = std::unordered_map<uint32_t, std::shared_ptr<RecordCache::Claim>>;
  // Of `wanted` (records this process neither holds nor asked for), those it fetches itself: a
  // chunk another process has claimed is left to it, and a record another wrote to the folder is
  // read from there. The claims taken, by chunk, go to `claims` (null for chunks left to others).
  std::vector<uint64_t> ClaimChunks(std::vector<uint64_t> wanted, Claims* claims);
  // How long a Fetch waits for another process's claim: a quarter of what a request may take with
  // its retries (at least 10 s). A chunk whose holder was waited for in vain (`stuck_`) is then
  // fetched record by record by this process, without waiting again.
  std::chrono::milliseconds ClaimPatience() const;
  // Prefetch; `ahead` false for a Fetch fetching a record's chunk (not counted as a call asking
  // ahead, which would make records asked for ahead look stale sooner).
  uint64_t PrefetchImpl(absl::Span<const uint64_t> indices, bool ahead);
  void Fetched(const std::vector<uint64_t>& group, uint64_t start,
               absl::StatusOr<std::string> bytes);
  static std::string S3ClientName(const std::string& bucket, const std::string& key);
  struct RawRange {
    uint32_t file;
    uint64_t offset, length;
  };
  // FetchRaw's GETs: these ranges, by a client of their own.
  absl::StatusOr<uint64_t> GetRaw(const std::vector<RawRange>& ranges) const;

  std::string url_;
  std::string bucket_;
  std::vector<std::string> keys_;  // of each file
  RemoteOptions options_;
  RemoteManifest manifest_;
  std::vector<RecordLocation> index_;
  std::vector<uint32_t> document_lengths_;  // until taken (TakeDocumentLengths)
  std::vector<uint64_t> chunk_begin_;       // first record of each chunk, then size()
  std::vector<uint32_t> chunk_of_;          // of each record; empty without whole_chunks_
  std::vector<bool> left_to_peer_;          // guarded by mu_; chunks counted in peer_chunks
  std::vector<bool> stuck_;  // guarded by mu_; chunks whose holder was waited for in vain
  bool whole_chunks_ = false;
  bool evict_served_ = false;   // a record served leaves the cache folder (see Fetch)
  uint64_t request_limit_ = 0;  // the most bytes one GET asks for (MakeChunks)
  std::unique_ptr<s3::ObjectStore> client_;
  std::unique_ptr<RecordCache> disk_;  // null without a cache folder

  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::unordered_map<uint64_t, Slot> slots_;  // guarded by mu_
  std::list<uint64_t> ahead_;                 // held, not served yet, in order of arrival
  std::list<uint64_t> mates_;                 // held chunk mates not asked for yet, oldest first
  std::list<uint64_t> served_;                // held and served, least recently served first
  uint64_t held_bytes_ = 0;                   // of ahead_, mates_ and served_
  uint64_t ahead_bytes_ = 0;                  // of slots with `ahead` set, held or on the way
  uint64_t prefetch_calls_ = 0;
  // Records of options_.first_batch_records not served yet: while not 0, Prefetch fetches the
  // first records of each call alone (fetched_alone_: those it did).
  uint64_t first_batch_left_ = 0;
  std::unordered_set<uint64_t> fetched_alone_;
  RemoteCounters counts_;
};

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_REMOTE_DATASET_H_
