// HostRelay: the group's messages over the group communicator's host path (Gloo/TCP), each a
// header and its payload (feed_message.h). Shard: the leader sends each member its own stream.
// Replicate: a chain (leader -> member 1 -> member 2 -> ..., each member forwarding every
// message while it arrives, so no link carries the group's data more than once) or a star (the
// leader sends every member its own copy), as FeederOptions::relay says. Encoded or decoded
// payloads. Threads as FeedTransport.
#ifndef DDPIO_BROADCAST_INTERNAL_HOST_RELAY_H_
#define DDPIO_BROADCAST_INTERNAL_HOST_RELAY_H_

#include <vector>

#include "ddpio/broadcast/internal/feed_context.h"
#include "ddpio/broadcast/internal/feed_transport.h"

namespace ddpio::broadcast::internal {

class HostRelay final : public FeedTransport {
 public:
  explicit HostRelay(FeedContext& ctx) : ctx_(ctx) {}

  absl::Status Setup(size_t /*sample_bytes*/) override { return absl::OkStatus(); }
  bool device_memory() const override { return false; }
  // Chain: member 1 only, which relays; star and shard: every member.
  std::vector<int> Peers() const override;
  int Upstream() const override { return chain() ? ctx_.local_rank() - 1 : 0; }

  // Sends at once, peer by peer; for the leader itself (0) pushes to its own window, moving
  // `owned` when given, else copying.
  absl::Status Send(const std::vector<int>& to, FeedHeader h, const uint8_t* data,
                    std::vector<uint8_t>* owned) override;
  absl::Status EndStep(uint64_t /*step*/, absl::Status status) override { return status; }
  absl::Status SendLast(const FeedHeader& h, const uint8_t* data) override {
    return Send(Peers(), h, data, nullptr);
  }
  void Receive() override;

 private:
  bool chain() const {
    return ctx_.options.mode == FeedMode::kReplicate && ctx_.options.relay == FeedRelay::kChain;
  }
  // The member a peer forwards every message to (-1: none).
  int Downstream() const {
    return chain() && ctx_.local_rank() + 1 < ctx_.layout.group_size() ? ctx_.local_rank() + 1 : -1;
  }

  FeedContext& ctx_;
};

}  // namespace ddpio::broadcast::internal

#endif  // DDPIO_BROADCAST_INTERNAL_HOST_RELAY_H_
