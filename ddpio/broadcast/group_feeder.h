// GroupFeeder: inside each group only the leader touches storage; its peers get their data over
// the group's Communicator. Every rank constructs one and iterates it like a plain loader:
//
//   auto group = job->Group(layout);                       // this rank's group communicator
//   auto feeder = GroupFeeder::Create(leader ? reader : nullptr, layout, rank, std::move(*group),
//   options); for (epoch ...) { feeder->StartEpoch(epoch); while ((batch = feeder->Next()).ok())
//   Train(*batch); }
//
// Modes: shard — rank r gets exactly the DistributedSampler's indices for r, with the
// augmentation it would have got reading for itself; the leader reads the group's samples and
// each peer receives only its own share. replicate — the sampler runs over groups and every
// member gets the group's batches. Payloads: encoded — the leader sends the stored records and
// every rank decodes and augments its own (with its own loader workers, overlapping reception);
// decoded — the leader's loaders decode and augment every member's batches and send them ready.
// group_size 1 in host memory reads directly: the rank's loader over the dataset, as a plain
// Loader (no feeder thread, no messages), with the same sampler, checks and counters.
//
// Threads: on the leader one thread reads (or takes decoded batches from the member loaders)
// and sends, at most `depth` messages ahead of each peer; on a peer one thread receives. Every
// rank checks that what arrives is what its own sampler expects (DataLoss otherwise), so a group
// out of step never trains silently on the wrong samples.
//
// Lock-step: every member calls StartEpoch with the same (epoch, start) and destroys the feeder
// at the same point; a run stopped early (StartEpoch or destruction mid-epoch) ends with an
// end-of-epoch message the peers drain up to. Failure: a corrupt record under the `fail` policy
// reaches every member as DataLoss (the leader sends the error); a dead peer or leader makes
// the others fail with Unavailable (the thread that sees it aborts the group communicator so the
// rest of the group learns at once), never a hang past `timeout`. After a data error (a store
// that failed past its retry budget, a corrupt record) the group is still whole: every member
// calls StartEpoch again (the same arguments: a state taken before the error) and the group goes
// on; after a lost member it cannot, and StartEpoch says so.
#ifndef DDPIO_BROADCAST_GROUP_FEEDER_H_
#define DDPIO_BROADCAST_GROUP_FEEDER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/feeder_options.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/comm/group_layout.h"
#include "ddpio/loader/hold_gate.h"
#include "ddpio/loader/loader.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::broadcast {

namespace internal {
struct FeedContext;
class FeedLeader;
class FeedTransport;
}  // namespace internal

// FeedMode, FeederOptions, FeederCounters and the other settings: feeder_options.h.

class GroupFeeder {
 public:
  // `reader`: the dataset, on the leader (and on every rank with readers kAll; ignored on
  // peers, which may pass null). `group`: this
  // rank's group communicator (group-local ranks, the leader is 0; host memory). InvalidArgument
  // for a leader without a dataset or a communicator that does not match the layout.
  static absl::StatusOr<std::unique_ptr<GroupFeeder>> Create(
      const storage::DatasetReader* reader, const comm::GroupLayout& layout, int rank,
      std::unique_ptr<comm::Communicator> group, const FeederOptions& options);
  ~GroupFeeder();
  GroupFeeder(const GroupFeeder&) = delete;
  GroupFeeder& operator=(const GroupFeeder&) = delete;

  // Starts `epoch` from `start` entries already consumed (the same on every member), also after a
  // data error (a new run, once the store is back). FailedPrecondition after a failure that ended
  // the group's connections (naming it).
  absl::Status StartEpoch(uint64_t epoch, uint64_t start = 0);
  // This rank's next batch (valid until the next Next / StartEpoch). OutOfRange at the end of
  // the epoch; DataLoss / Unavailable / DeadlineExceeded as described above.
  absl::StatusOr<loader::Batch> Next();
  // The same, kept by the caller until it drops the hold (also past StartEpoch and the feeder's
  // destruction): up to options.loader.held_batches at once, then ResourceExhausted after
  // options.loader.held_timeout (Loader::NextHeld; loader::IsHeldLimit — nothing was consumed,
  // and Next may be called again once a batch is released). Zero-copy either way: the loader's
  // slot, or the received buffer of a decoded batch.
  absl::StatusOr<loader::HeldBatch> NextHeld();
  // Whether NextHeld has its batch (or an error, or the epoch's end) at hand, waiting up to
  // `timeout`; consumes nothing (Loader::WaitReady). Its wait counts as the consumer's
  // (FeederCounters::loader_wait_ns), as NextHeld's does.
  bool WaitReady(std::chrono::milliseconds timeout);

  uint64_t NumBatches() const { return batches_.size(); }
  // Batches this rank gets in a whole epoch (from position 0), without starting it.
  absl::StatusOr<uint64_t> BatchesInEpoch(uint64_t epoch) const;
  // The position to resume this epoch from after the batches delivered so far.
  uint64_t ResumePosition() const;
  FeederCounters counters() const;
  bool is_leader() const;
  // Whether this rank reads from storage: the leader, or every rank with readers kAll.
  bool reads_storage() const;
  uint64_t dataset_size() const { return dataset_size_; }
  // Bytes of one output sample (the loader's).
  size_t sample_bytes() const { return sample_bytes_; }

 private:
  // The parts behind the feeder (internal/): what they share, how messages travel (a host
  // relay or a device link, by the group communicator's memory) and, on a rank that reads, the
  // reader that sends through it. This class is the consumer side: epochs, the window's
  // batches handed out in order, their checks and holds.
  explicit GroupFeeder(std::unique_ptr<internal::FeedContext> ctx);
  absl::Status Setup();
  void StopRun();
  absl::StatusOr<loader::HeldBatch> NextDecoded();

  // Constant after Create (the parts refer to ctx_, declared first so it goes last).
  std::unique_ptr<internal::FeedContext> ctx_;
  std::unique_ptr<sampler::DistributedSampler> sampler_;
  uint64_t dataset_size_ = 0;
  size_t sample_bytes_ = 0;
  std::shared_ptr<loader::HoldGate> decoded_held_;  // decoded: bounds the batches held
  // Encoded: this rank's loader over the window; a group of one in host memory (direct_): its
  // loader over the dataset itself, with no transport, leader or thread.
  std::unique_ptr<loader::Loader> loader_;
  bool direct_ = false;
  std::unique_ptr<internal::FeedTransport> transport_;
  std::unique_ptr<internal::FeedLeader> leader_;  // on a rank that reads storage
  int decode_threads_ = 0;                        // FeederCounters::decode_threads

  // Run state (the consumer's thread).
  std::optional<sampler::EpochPlan> plan_;
  std::vector<sampler::BatchRange> batches_;
  uint64_t delivered_ = 0;
  std::shared_ptr<void> held_;  // the batch Next() handed out
  std::thread thread_;  // reads and sends (FeedLeader::Run), or receives (FeedTransport::Receive)
  std::atomic<bool> stop_{false};  // read by the thread and the loader
  bool running_ = false;
  absl::Status failed_;  // first failure seen by the consumer thread
  uint64_t loader_wait_ns_ = 0, batches_total_ = 0, images_total_ = 0, copied_total_ = 0;
};

}  // namespace ddpio::broadcast

#endif  // DDPIO_BROADCAST_GROUP_FEEDER_H_
