// RemoteOptions and RemoteCounters: how a dataset in an object store is read (remote_dataset.h)
// and what reading it cost — plain structs, apart from the reader and its HTTP client, so that
// the options and statistics of the layers above (store_settings.h, the pipeline's) carry them
// without either.
#ifndef DDPIO_STORAGE_REMOTE_REMOTE_OPTIONS_H_
#define DDPIO_STORAGE_REMOTE_REMOTE_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "ddpio/storage/s3/retry_policy.h"

namespace ddpio::storage::remote {

// A dataset's manifest and record index as the store holds them: what one rank of a job fetches
// and broadcasts, so that the others open the dataset without asking the store
// (RemoteOptions::preloaded; the pipeline does so). Checked on open exactly as if fetched.
struct RemoteIndexBytes {
  std::string manifest;
  std::string index;
};

// The block order's records per chunk by default (pipeline_options.h's block_chunk, defined here
// so that the upload can lay chunk objects out for it): a chunk object holds a multiple of this
// many records where it can (upload.h), so that none of the order's chunks spans two objects.
inline constexpr uint64_t kDefaultBlockChunkRecords = 128;

// In the exact order, the share of each chunk's records a reader is asked for in an epoch: a rank's
// samples are 1/world of them (a group's stream 1/groups in replicate), and a node's ranks sharing
// a cache folder ask for their sum (RemoteOptions::chunk_share).
struct ChunkShare {
  double alone = 1;   // this process's, reading without a cache folder
  double folder = 1;  // its node's ranks', sharing a cache folder
};

struct RemoteOptions {
  // Fetched records held in memory; also the most fetched ahead and not yet asked for.
  uint64_t memory_bytes = uint64_t{256} << 20;
  // Records of one file closer than this are fetched by one GET (the bytes between are read and
  // dropped), up to max_request_bytes a GET.
  uint64_t coalesce_gap = uint64_t{64} << 10;
  uint64_t max_request_bytes = uint64_t{8} << 20;
  int max_in_flight = 16;  // GETs at once, at least
  // GETs at once at most: the client opens its window up to this many when the store's latency
  // needs more in flight for the rate it is asked for (Little's law: a reader 30 ms from its store
  // gets 16 / 0.03 s = 533 records a second with 16; s3/in_flight_window.h). Below
  // max_in_flight: this many, fixed.
  int in_flight_limit = 128;
  // Requests a second this reader may send (0: no cap); either way its rate falls when the store
  // says it is overrun and grows back after (s3/rate_governor.h).
  double max_requests_per_s = 0;
  // A dataset whose records fit the budget that keeps them (the cache folder's with one, else
  // memory's) is fetched a whole chunk at a time: a record asked for brings the records of its
  // chunk — its neighbours in the file, as far as one GET reaches (max_request_bytes, no gap above
  // coalesce_gap) — in the same GET, so an epoch in any order costs about one GET per chunk
  // instead of one per record, and a later epoch asks the store nothing — in the exact order when
  // the reader needs at least min_chunk_share of each chunk (below). Default on; off: only the
  // records asked for (and what coalescing joins).
  bool whole_chunks = true;
  // Not 0: the sample order keeps each reader to about this many records at a time, a few chunks
  // (the block order, sampler/block_order.h). With whole_chunks, a record asked for then brings
  // its whole chunk whatever the dataset's size — its chunk mates are asked for soon — provided
  // the budget that keeps records (the cache folder's, else memory's) holds at least
  // kMinChunksHeld of its largest chunks; a budget smaller than the records in use is logged
  // (chunks would be fetched more than once). With a cache folder whose budget the dataset
  // exceeds, a record served is removed from the folder: the order needs it once an epoch (each
  // rank of a node serves its own samples), so a chunk leaves the folder with its last sample and
  // the folder holds about the chunks in use, not a budget's worth that a later epoch's order
  // would evict before reading.
  uint64_t chunk_order_records = 0;
  // Not 0: the order's chunks are this many consecutive records (the block order's block_chunk):
  // no chunk fetched whole spans two of them, so that the order's chunk costs one GET.
  uint64_t order_chunk_records = 0;
  // With order_chunk_records, one GET fetches up to this much of an order's chunk (instead of
  // max_request_bytes): fewer, larger requests, as an object store prefers.
  static constexpr uint64_t kMaxOrderChunkBytes = uint64_t{64} << 20;
  // With whole chunks: until this many records are served (the first batch), the first this many
  // records of each Prefetch (the batch a loader worker asks for, whichever asks first) are
  // fetched each by a GET of its own, sent before the GETs of their chunks, so that the first
  // batch waits for its records, not for every chunk they fall in (a first batch drawn from a
  // shuffled dataset touches most of its chunks). Their bytes are fetched twice, once. Not the
  // records of a chunk another process of the node has claimed (they come from the folder when
  // it has written them). 0: none.
  uint64_t first_batch_records = 0;
  // In the exact order (chunk_order_records 0), the share of each chunk's records this reader is
  // asked for in an epoch (the pipeline sets it from the job's layout; 1 when not known). A whole
  // chunk brings 1/share times the bytes an epoch needs (the rest are later epochs' records,
  // fetched early), so whole chunks are fetched only when the share — the folder's with a cache
  // folder, else this process's — is at least min_chunk_share. In the simulator (4 nodes: a
  // share of 1/4; docs/PERFORMANCE.md) whole chunks took 2.2x as long over two epochs behind
  // 100 Mbit/s and 1.4x behind 1 Gbit/s as the records asked for, for 12x fewer requests; the block
  // order, where each reader's chunks are its own, is the order for many nodes. 0: whole chunks
  // whatever the share (whole chunks asked for explicitly, or DDPIO_S3_WHOLE_CHUNKS=1).
  ChunkShare chunk_share;
  double min_chunk_share = 0.5;
  static constexpr uint64_t kMinChunksHeld = 4;
  // Reads ride out a store that fails (a gateway restart, an outage, bursts of 503 SlowDown):
  // retried with capped backoff for up to 5 minutes from a request's first attempt, then the
  // store's error (DDPIO_S3_OUTAGE_SECONDS or an explicit value sets it, store_settings.h; a job's
  // timeout bounds it, ReaderOptions).
  s3::RetryPolicy retry = [] {
    s3::RetryPolicy r;
    r.give_up_after = std::chrono::minutes(5);
    return r;
  }();
  // Given: the manifest and the record index are these (RemoteDataset::FetchIndex's, fetched by
  // another rank), not fetched; checked all the same. Null (default): fetched at open.
  std::shared_ptr<const RemoteIndexBytes> preloaded;
  // A local folder for fetched records ("" none) and its byte budget. The processes of a node
  // that share one fetch each chunk once between them (RecordCache's claims): a chunk another is
  // fetching is waited for and read from the folder.
  std::string cache_dir;
  uint64_t cache_bytes = uint64_t{16} << 30;
};

struct RemoteCounters {
  uint64_t requests = 0;  // HTTP requests sent to the store (retries included)
  uint64_t retries = 0;
  uint64_t bytes = 0;  // response bytes received
  uint64_t records_fetched = 0;
  uint64_t memory_hits = 0;  // Fetch answered by a prefetched or earlier record
  uint64_t disk_hits = 0;    // ... by the cache folder
  uint64_t misses = 0;       // Fetch had to wait for the store
  uint64_t refetches = 0;    // records fetched again after a checksum mismatch
  // Records fetched with a record of their chunk before anyone asked for them (whole_chunks).
  uint64_t chunk_records = 0;
  // Chunks left to another process sharing the cache folder, which was fetching them (their
  // records were read from the folder: RecordCache's claims).
  uint64_t peer_chunks = 0;
  // Records removed from the cache folder once served (RemoteOptions::chunk_order_records with a
  // dataset larger than the folder's budget: a chunk leaves the folder with its last sample).
  uint64_t served_evicted = 0;
  // Signs the store was overrun (503 SlowDown, 429, timed-out attempts), and the request rate the
  // reader's governor allows now (0: unlimited).
  uint64_t throttles = 0;
  double rate_limit_per_s = 0;
  // The most GETs in flight the client's window allowed (RemoteOptions::in_flight_limit).
  int in_flight_window_max = 0;
};

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_REMOTE_OPTIONS_H_
