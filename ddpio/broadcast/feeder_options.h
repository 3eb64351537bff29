// The group feeder's settings and counters: how a group shares its data (mode, payload, who
// reads, how replicate relays), the limits of a feed, and what a rank moved. Pipeline and the
// trainer take these options and report these counters; the feeder itself (group_feeder.h) is
// private to the library. Plain values: no thread-safety concerns.
#ifndef DDPIO_BROADCAST_FEEDER_OPTIONS_H_
#define DDPIO_BROADCAST_FEEDER_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/feed_message.h"
#include "ddpio/comm/group_layout.h"
#include "ddpio/loader/loader.h"
#include "ddpio/sampler/distributed_sampler.h"

namespace ddpio::broadcast {

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
  device::CudaRuntime* cuda = nullptr;
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
  uint64_t records_read = 0;  // records this rank read from storage (0 on peers)
  uint64_t bytes_read = 0;    // their stored bytes
  uint64_t bytes_sent = 0;    // on the wire: prefix + header + payload
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t network_wait_ns = 0;  // inside Send / Recv
  // Reading storage on this rank (a leader's reading thread, or the workers of loaders that read
  // the dataset themselves) and decoding + augmenting (this rank's loaders), summed over threads.
  uint64_t read_ns = 0;
  uint64_t decode_ns = 0;
  uint64_t loader_wait_ns = 0;  // the consumer blocked in Next() or WaitReady()
  uint64_t batches = 0;         // handed to the consumer
  uint64_t images = 0;          // samples in them
  uint64_t batches_copied =
      0;  // of them, handed out as copies past the held limit (HeldOverflow::kCopy)
  uint64_t bad_samples = 0;  // decoded on this rank and skipped (bad_samples = kSkip)
  std::vector<loader::SkippedSample> skipped;  // the first 100 of them
  // From opening the pipeline to the first batch it handed out (set by Pipeline; 0 until then):
  // what a trainer waits before its first step.
  uint64_t time_to_first_batch_ns = 0;
  // The path taken: true when this rank's loader reads the dataset itself (a group of one in
  // host memory: no feeder thread, no messages); false when records or batches come as messages.
  bool direct = false;
  // Threads decoding on this rank: its loaders' workers — its own loader's, and on a rank that
  // decodes for its group (decoded payload) those of the loader of every stream it serves; 0 on a
  // member sent decoded batches. The same for the feeder's whole life.
  int decode_threads = 0;
};

// The sampler options of the streams a feeder serves: the world's (shard: rank r's stream is r's
// DistributedSampler share) or the groups' (replicate: num_replicas = the number of groups, and
// group g's stream is share g, the same for every member).
sampler::SamplerOptions StreamSamplerOptions(const sampler::SamplerOptions& world, FeedMode mode,
                                             const comm::GroupLayout& layout);

}  // namespace ddpio::broadcast

#endif  // DDPIO_BROADCAST_FEEDER_OPTIONS_H_
