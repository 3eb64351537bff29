// GroupFeeder: inside each group only the leader touches storage; its peers get their data over
// the group's Communicator. Every rank constructs one and iterates it like a plain loader:
//
//   auto group = job->Group(layout);                       // this rank's group communicator
//   auto feeder = GroupFeeder::Create(leader ? reader : nullptr, layout, rank, std::move(*group), options);
//   for (epoch ...) { feeder->StartEpoch(epoch); while ((batch = feeder->Next()).ok()) Train(*batch); }
//
// Modes (DESIGN.md): shard — rank r gets exactly the DistributedSampler's indices for r, with the
// augmentation it would have got reading for itself; the leader reads the group's samples and
// each peer receives only its own share. replicate — the sampler runs over groups and every
// member gets the group's batches. Payloads: encoded — the leader sends the stored records and
// every rank decodes and augments its own (with its own loader workers, overlapping reception);
// decoded — the leader's loaders decode and augment every member's batches and send them ready.
// group_size 1 is the same code with no peers: every rank reads for itself.
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
// rest of the group learns at once), never a hang past `timeout`.
#ifndef DDPIO_BROADCAST_GROUP_FEEDER_H_
#define DDPIO_BROADCAST_GROUP_FEEDER_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/broadcast/feed_message.h"
#include "ddpio/broadcast/feed_window.h"
#include "ddpio/loader/hold_gate.h"
#include "ddpio/loader/loader.h"
#include "ddpio/comm/group_layout.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::broadcast {

namespace internal {
class DevicePool;
}

enum class FeedMode { kShard, kReplicate };
enum class FeedPayload { kEncoded, kDecoded };
enum class FeedReaders { kLeader, kAll };
enum class FeedRelay { kChain, kStar };
std::string FeedModeName(FeedMode mode);
absl::StatusOr<FeedMode> ParseFeedMode(std::string_view name);
std::string FeedPayloadName(FeedPayload payload);
absl::StatusOr<FeedPayload> ParseFeedPayload(std::string_view name);
std::string FeedReadersName(FeedReaders readers);
absl::StatusOr<FeedReaders> ParseFeedReaders(std::string_view name);
std::string FeedRelayName(FeedRelay relay);
absl::StatusOr<FeedRelay> ParseFeedRelay(std::string_view name);

struct FeederOptions {
  // The world's sampler settings; dataset_size is taken from the leader's dataset.
  sampler::SamplerOptions sampler;
  loader::LoaderOptions loader;
  FeedMode mode = FeedMode::kShard;
  FeedPayload payload = FeedPayload::kEncoded;
  // kLeader (default): the group's leader reads for every member. kAll: every member reads its
  // own stream itself (shard: its share; replicate: the group's whole stream) and nothing
  // crosses the network — what a trainer without group feeding does, the baseline.
  FeedReaders readers = FeedReaders::kLeader;
  // Replicate mode: kChain (default) — leader -> member 1 -> member 2 -> ..., each member
  // forwarding every chunk as it arrives, so no link carries the group's data more than once;
  // kStar — the leader sends each member its own copy (G - 1 copies on the leader's uplink).
  FeedRelay relay = FeedRelay::kChain;
  // Records the leader asks storage for ahead of the one it copies (ReadTxn::Prefetch, a
  // sliding window across steps); 0: none, each record faulted in page by page. It is the cap
  // on one leader's reads in flight (docs/PERFORMANCE.md, "Many hosts", chose the default).
  int read_ahead = 64;
  int depth = 2;  // messages a leader may be ahead of each peer (and of its own loader)
  // With loader.copy_to_device: this rank's loader stages every batch on the GPU (Batch::
  // device_data) on its own stream. Encoded payload only (decoded batches arrive ready in host
  // buffers: InvalidArgument). On a device-memory group (NCCL): the leader's loaders decode into
  // its page-locked memory, from which batches are staged. Must outlive the feeder and every
  // batch held from it.
  loader::CudaRuntime* cuda = nullptr;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // each send / receive
  FeedLimits limits;
  // The dataset this member named, compared across the group at creation (a member that names
  // another dataset, or cannot open its own, fails the whole group naming it). Empty identity
  // on a rank that reads: taken from its reader; empty on a peer: not compared.
  struct Dataset {
    std::string path;
    std::string identity;  // storage::DatasetIdentity of what `path` holds
    std::string error;     // why it could not be opened: "<absl::StatusCode number> <message>"
  };
  Dataset dataset;
};

// Per-rank counters, cumulative over epochs.
struct FeederCounters {
  uint64_t records_read = 0;     // records this rank read from storage (0 on peers)
  uint64_t bytes_read = 0;       // their stored bytes
  uint64_t bytes_sent = 0;       // on the wire: prefix + header + payload
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t network_wait_ns = 0;  // inside Send / Recv
  uint64_t loader_wait_ns = 0;   // the consumer blocked in Next()
  uint64_t batches = 0;          // handed to the consumer
  uint64_t images = 0;           // samples in them
  uint64_t batches_copied = 0;   // of them, handed out as copies past the held limit (HeldOverflow::kCopy)
  uint64_t bad_samples = 0;      // decoded on this rank and skipped (bad_samples = kSkip)
  std::vector<loader::SkippedSample> skipped;  // the first 100 of them
};

// The sampler options of the streams a feeder serves: the world's (shard: rank r's stream is r's
// DistributedSampler share) or the groups' (replicate: num_replicas = the number of groups, and
// group g's stream is share g, the same for every member).
sampler::SamplerOptions StreamSamplerOptions(const sampler::SamplerOptions& world, FeedMode mode,
                                             const comm::GroupLayout& layout);

class GroupFeeder {
 public:
  // `reader`: the dataset, on the leader (and on every rank with readers kAll; ignored on
  // peers, which may pass null). `group`: this
  // rank's group communicator (group-local ranks, the leader is 0; host memory). InvalidArgument
  // for a leader without a dataset or a communicator that does not match the layout.
  static absl::StatusOr<std::unique_ptr<GroupFeeder>> Create(const storage::DatasetReader* reader,
                                                             const comm::GroupLayout& layout, int rank,
                                                             std::unique_ptr<comm::Communicator> group,
                                                             const FeederOptions& options);
  ~GroupFeeder();
  GroupFeeder(const GroupFeeder&) = delete;
  GroupFeeder& operator=(const GroupFeeder&) = delete;

  // Starts `epoch` from `start` entries already consumed (the same on every member).
  // FailedPrecondition after a failure (naming it).
  absl::Status StartEpoch(uint64_t epoch, uint64_t start = 0);
  // This rank's next batch (valid until the next Next / StartEpoch). OutOfRange at the end of
  // the epoch; DataLoss / Unavailable / DeadlineExceeded as described above.
  absl::StatusOr<loader::Batch> Next();
  // The same, kept by the caller until it drops the hold (also past StartEpoch and the feeder's
  // destruction): up to options.loader.held_batches at once, then ResourceExhausted after
  // options.loader.held_timeout (Loader::NextHeld; loader::IsHeldLimit — nothing was consumed,
  // and Next may be called again once a batch is released). Zero-copy either way: the loader's slot, or
  // the received buffer of a decoded batch.
  absl::StatusOr<loader::HeldBatch> NextHeld();

  uint64_t NumBatches() const { return batches_.size(); }
  // Batches this rank gets in a whole epoch (from position 0), without starting it.
  absl::StatusOr<uint64_t> BatchesInEpoch(uint64_t epoch) const;
  // The position to resume this epoch from after the batches delivered so far.
  uint64_t ResumePosition() const;
  FeederCounters counters() const;
  bool is_leader() const { return local_rank_ == 0; }
  // Whether this rank reads from storage: the leader, or every rank with readers kAll.
  bool reads_storage() const { return local_rank_ == 0 || options_.readers == FeedReaders::kAll; }
  uint64_t dataset_size() const { return dataset_size_; }
  // Bytes of one output sample (the loader's).
  size_t sample_bytes() const { return sample_bytes_; }

 private:
  struct Member;  // a member as the leader serves it
  GroupFeeder() = default;
  absl::Status Agree();
  absl::Status Setup();
  absl::Status SetupLeader();
  void StopRun();
  absl::Status StartLeaderRun(uint64_t epoch, uint64_t start);
  void LeaderRun(uint64_t epoch);
  void FinishLeaderRun(uint64_t epoch, absl::Status status);
  absl::Status SendEncodedStep(uint64_t epoch, uint64_t step, storage::ReadTxn& txn);
  // Before copying a record: asks storage for the next read_ahead records (ReadTxn::Prefetch).
  void ReadAhead(storage::ReadTxn& txn);
  absl::Status SendDecodedStep(uint64_t epoch, uint64_t step, bool* more);
  // Takes this step's decoded batch from every member loader that has one and calls `fn` with it
  // and its header; *more when any had one. Updates the read counters.
  absl::Status ForEachDecodedBatch(uint64_t epoch, uint64_t step, bool* more,
                                   const std::function<absl::Status(Member&, const loader::Batch&, FeedHeader)>& fn);
  // The device path (group_feeder_device.cc): a group communicator in device memory (NCCL)
  // carries decoded batches as a fixed-size header slot, then the payload, from device buffer
  // to device buffer.
  absl::Status SetupDevice();
  absl::Status SendDecodedStepDevice(uint64_t epoch, uint64_t step, bool* more);
  absl::Status DeliverDevice(const FeedHeader& h, const uint8_t* data);  // end and error messages
  void PeerRunDevice();
  // Sends `data` (h.payload_bytes of it) to the members in `to` (group-local ranks); for the
  // leader itself (0) pushes it to its own window, moving `owned` when given, else copying.
  absl::Status Deliver(const std::vector<int>& to, const FeedHeader& h, const uint8_t* data,
                       std::vector<uint8_t>* owned);
  void PeerRun();
  // Group-local ranks the leader sends each message to itself, and (on a peer) the member a
  // message comes from and the one it is forwarded to (-1: none).
  std::vector<int> LeaderTargets() const;
  int upstream() const;
  int downstream() const;
  bool chain() const {  // (over NCCL, replicate is ncclBroadcast: NCCL pipelines it itself)
    return !device_ && options_.mode == FeedMode::kReplicate && options_.relay == FeedRelay::kChain;
  }
  absl::StatusOr<loader::HeldBatch> NextDecoded();
  int stream_rank(int member_rank) const;

  // Constant after Create.
  const storage::DatasetReader* reader_ = nullptr;
  std::optional<comm::GroupLayout> layout_;
  int rank_ = 0;
  int local_rank_ = 0;
  std::unique_ptr<comm::Communicator> group_;
  FeederOptions options_;
  sampler::SamplerOptions sampler_options_;  // of this feeder's streams (world or groups)
  std::unique_ptr<sampler::DistributedSampler> sampler_;
  uint64_t dataset_size_ = 0;
  size_t sample_bytes_ = 0;
  // This rank's own batches (records or decoded); shared with the holds of decoded batches,
  // which give their buffers back to it while it lives.
  std::shared_ptr<FeedWindow> window_;
  std::shared_ptr<loader::HoldGate> decoded_held_;  // decoded: bounds the batches held
  std::unique_ptr<loader::Loader> loader_;  // encoded: this rank's loader over window_
  std::vector<std::unique_ptr<Member>> members_;  // leader only, in group order (self first)
  // The device path: payload buffers, and one header slot per stream served (host and device).
  bool device_ = false;
  size_t slot_bytes_ = 0;
  std::shared_ptr<internal::DevicePool> pool_;
  std::vector<std::vector<uint8_t>> host_slots_;
  std::vector<std::shared_ptr<uint8_t>> device_slots_;

  // Run state.
  std::optional<sampler::EpochPlan> plan_;
  std::vector<sampler::BatchRange> batches_;
  uint64_t delivered_ = 0;
  std::shared_ptr<void> held_;    // the batch Next() handed out
  std::thread thread_;            // leader: reads and sends; peer: receives
  std::atomic<bool> stop_{false};
  bool running_ = false;
  bool comm_broken_ = false;  // leader thread: a send failed
  // Leader thread: steps in the run, and the read-ahead's position (records hinted / copied,
  // indices queued for hinting, the next step to queue).
  uint64_t steps_ = 0;
  std::deque<uint64_t> ahead_;
  uint64_t ahead_step_ = 0, hinted_ = 0, copied_ = 0;
  absl::Status run_status_;   // leader thread: how its run ended (read after joining it)
  absl::Status failed_;  // first failure seen by the consumer thread

  // Counters written by the feeder thread, read by counters().
  std::atomic<uint64_t> records_read_{0}, bytes_read_{0}, bytes_sent_{0}, bytes_received_{0};
  std::atomic<uint64_t> messages_sent_{0}, messages_received_{0}, network_wait_ns_{0};
  uint64_t loader_wait_ns_ = 0, batches_total_ = 0, images_total_ = 0, copied_total_ = 0;
};

}  // namespace ddpio::broadcast

#endif  // DDPIO_BROADCAST_GROUP_FEEDER_H_
