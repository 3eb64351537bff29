// FeedLeader: the reading side of a GroupFeeder, on the group's leader (and on every rank with
// readers kAll). One thread (Run) reads the group's records (encoded) or takes the member
// loaders' decoded batches, and sends each member its share step by step through the transport,
// at most `depth` messages ahead of the slowest member (the window's and the transport's
// backpressure); its own share goes to its own window like a peer's. The run ends with an
// end-of-epoch message to every peer, or the error (a data error as it is; a broken group is
// aborted so the peers fail at once).
//
// Threads: Setup, Start and Stop on the thread that owns the feeder, never while Run runs on
// the feeder's thread; status() after that thread is joined.
#ifndef DDPIO_BROADCAST_INTERNAL_FEED_LEADER_H_
#define DDPIO_BROADCAST_INTERNAL_FEED_LEADER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "ddpio/broadcast/internal/feed_context.h"
#include "ddpio/broadcast/internal/feed_transport.h"
#include "ddpio/loader/loader.h"
#include "ddpio/sampler/distributed_sampler.h"

namespace ddpio::broadcast::internal {

// A stream the leader serves: one member's (shard) or the group's, sent to every member
// (replicate).
struct Member {
  std::vector<int> to;  // group-local ranks that get this stream
  int stream = 0;       // its rank in the sampler's plan
  std::vector<sampler::BatchRange> batches;
  std::unique_ptr<loader::Loader> loader;  // decoded: reads, decodes and augments this stream
  bool done = false;
};

class FeedLeader {
 public:
  FeedLeader(FeedContext& ctx, FeedTransport& transport) : ctx_(ctx), transport_(transport) {}

  // Once, at creation: the streams served and (decoded payload) their loaders.
  absl::Status Setup();
  // Before each run: `plan` (which must outlive the run) of `epoch` from `start`.
  absl::Status Start(const sampler::EpochPlan& plan, uint64_t epoch, uint64_t start);
  // The feeder's thread: the whole run, until its end, an error or `stop`.
  void Run(uint64_t epoch, const std::atomic<bool>& stop);
  // After Run returned: stops the member loaders.
  void Stop();
  // How the last run ended (read after joining the thread that ran it).
  const absl::Status& status() const { return run_status_; }
  // The member loaders' workers (decoded payload; 0 for encoded, where every member decodes its
  // own): threads this rank decodes the group's batches with. Between runs (after Setup).
  int decode_threads() const;

 private:
  void Finish(uint64_t epoch, absl::Status status);
  absl::Status SendEncodedStep(uint64_t epoch, uint64_t step, storage::ReadTxn& txn);
  // Before copying a record: asks storage for the next read_ahead records (ReadTxn::Prefetch).
  void ReadAhead(storage::ReadTxn& txn);
  absl::Status SendDecodedStep(uint64_t epoch, uint64_t step, bool* more);
  // Takes this step's decoded batch from every member loader that has one and calls `fn` with it
  // and its header; *more when any had one. Updates the read counters.
  absl::Status ForEachDecodedBatch(
      uint64_t epoch, uint64_t step, bool* more,
      const std::function<absl::Status(Member&, const loader::Batch&, FeedHeader)>& fn);

  FeedContext& ctx_;
  FeedTransport& transport_;
  // Constant after Setup: in the order every step serves them.
  std::vector<std::unique_ptr<Member>> members_;

  // Run state, the feeder's thread's while a run is on.
  const sampler::EpochPlan* plan_ = nullptr;
  uint64_t steps_ = 0;  // in the run: the longest member stream's
  // The read-ahead's position: indices queued for hinting, the next step to queue, records
  // hinted and copied.
  std::deque<uint64_t> ahead_;
  uint64_t ahead_step_ = 0, hinted_ = 0, copied_ = 0;
  absl::Status run_status_;
};

}  // namespace ddpio::broadcast::internal

#endif  // DDPIO_BROADCAST_INTERNAL_FEED_LEADER_H_
