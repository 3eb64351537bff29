// What the parts of a GroupFeeder share: the group (layout, this rank, its communicator), the
// options, the streams' sampler options, the window this rank's batches arrive in, the traffic
// counters, and how errors name a member. GroupFeeder owns one and its parts (the leader's
// reader, the transport) refer to it; it outlives them.
//
// Threads: the fields under "constant after GroupFeeder::Create" are read by every thread; the
// window is thread-safe; the traffic counters are written by the feeder's thread (the leader's
// reader, or a peer's receiver) and read by GroupFeeder::counters().
#ifndef DDPIO_BROADCAST_INTERNAL_FEED_CONTEXT_H_
#define DDPIO_BROADCAST_INTERNAL_FEED_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ddpio/broadcast/feed_window.h"
#include "ddpio/broadcast/feeder_options.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/comm/group_layout.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::broadcast::internal {

// What this rank moved over the group, cumulative over epochs (FeederCounters' fields of the same
// names).
struct FeedTraffic {
  std::atomic<uint64_t> records_read{0}, bytes_read{0}, bytes_sent{0}, bytes_received{0};
  std::atomic<uint64_t> messages_sent{0}, messages_received{0}, network_wait_ns{0};
  // The leader's time reading storage (its reading thread, or its member loaders' workers) and
  // decoding for the group (decoded payload: its member loaders).
  std::atomic<uint64_t> read_ns{0}, decode_ns{0};
};

struct FeedContext {
  FeedContext(const comm::GroupLayout& layout, int rank) : layout(layout), rank(rank) {}

  // Constant after GroupFeeder::Create.
  const storage::DatasetReader* reader = nullptr;  // on a rank that reads storage, else null
  const comm::GroupLayout layout;
  const int rank;
  std::unique_ptr<comm::Communicator> group;  // group-local ranks; the leader is 0
  FeederOptions options;
  sampler::SamplerOptions sampler_options;  // of the feeder's streams (world or groups)
  // This rank's own batches (records or decoded); shared with the holds of decoded batches,
  // which give their buffers back to it while it lives.
  std::shared_ptr<FeedWindow> window;

  FeedTraffic traffic;

  // Ends the group's connections (Communicator::Abort) after a failure of the transport — a lost
  // member, a timeout, a message that does not decode: peers blocked on this rank fail at once.
  // Afterwards the group cannot run again (group_aborted); a data error sent as a message leaves it
  // whole, and a new run may start (GroupFeeder::StartEpoch).
  void AbortGroup() {
    group_aborted = true;
    group->Abort();
  }
  std::atomic<bool> group_aborted{false};

  int local_rank() const { return layout.local_group_rank(rank); }
  // The leader, or every rank with readers kAll.
  bool reads_storage() const { return local_rank() == 0 || options.readers == FeedReaders::kAll; }
  // The sampler stream a member (by global rank) is fed: its own (shard) or its group's.
  int stream_rank(int member_rank) const {
    return options.mode == FeedMode::kShard ? member_rank : layout.group_rank(member_rank);
  }
  // How errors name a member of this rank's group by its group-local rank: "the group leader
  // (rank 4)", "group member 2 (rank 6)".
  std::string MemberName(int local) const;
};

// The same for any group: member `local` whose global rank is `rank`.
std::string MemberName(int local, int rank);

}  // namespace ddpio::broadcast::internal

#endif  // DDPIO_BROADCAST_INTERNAL_FEED_CONTEXT_H_
