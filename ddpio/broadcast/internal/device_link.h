// DeviceLink: the group's messages over a group communicator in device memory (NCCL). Decoded
// batches only: encoded records are decoded on the CPU by every member's own loader, so they
// travel in host memory over a host transport (Pipeline picks a Gloo group for them).
//
// Every message is a fixed-size header slot (feed_message.h: a receive must be posted with its
// size), then the payload of the size the slot announces. The leader stages each of this step's
// batches, and the slots, host -> device (Communicator::StageIn: a copy stream whose event the
// communication stream waits for), then
//   replicate: ncclBroadcast of the slot and of the batch from the leader to the whole group;
//   shard:     one group of ncclSends — every peer's slot and its own batch — answered by each
//              peer's two ncclRecvs.
// Peers receive straight into a device buffer from a pool; the consumer gets it as
// Batch::device_data (Batch::data is null), and the buffer returns to the pool when the batch is
// released. The receiving thread reads each slot back to the host (it must know the payload's
// size, and checks it like any message); the consumer never waits on the device.
// Threads as FeedTransport; DevicePool is thread-safe.
#ifndef DDPIO_BROADCAST_INTERNAL_DEVICE_LINK_H_
#define DDPIO_BROADCAST_INTERNAL_DEVICE_LINK_H_

#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/internal/feed_context.h"
#include "ddpio/broadcast/internal/feed_transport.h"

namespace ddpio::broadcast::internal {

// Buffers of one size in the group communicator's memory (the device's, over NCCL), reused: a
// buffer handed out returns to the pool when its last reference goes, while the pool lives.
// Allocates when none is free; the feeder's window and hold limits bound how many are out.
class DevicePool : public std::enable_shared_from_this<DevicePool> {
 public:
  DevicePool(comm::Communicator& comm, size_t bytes) : comm_(comm), bytes_(bytes) {}
  absl::StatusOr<std::shared_ptr<uint8_t>> Get();
  size_t bytes() const { return bytes_; }

 private:
  comm::Communicator& comm_;
  const size_t bytes_;
  std::mutex mu_;
  std::vector<std::shared_ptr<uint8_t>> free_;  // guarded by mu_
};

class DeviceLink final : public FeedTransport {
 public:
  explicit DeviceLink(FeedContext& ctx) : ctx_(ctx) {}

  // InvalidArgument for the encoded payload; allocates the header slots (one per stream the
  // leader serves, one on a peer).
  absl::Status Setup(size_t sample_bytes) override;
  bool device_memory() const override { return true; }
  // Every member (replicate is a broadcast: NCCL pipelines it itself).
  std::vector<int> Peers() const override;
  int Upstream() const override { return 0; }

  // Stages the batch and its slot on the device; EndStep sends every staged one in one transfer.
  absl::Status Send(const std::vector<int>& to, FeedHeader h, const uint8_t* data,
                    std::vector<uint8_t>* owned) override;
  absl::Status EndStep(uint64_t step, absl::Status status) override;
  absl::Status SendLast(const FeedHeader& h, const uint8_t* data) override;
  void Receive() override;

 private:
  // A message staged on the device for this step (its slot is device_slots_ at its position).
  struct Staged {
    const std::vector<int>* to;
    FeedHeader header;
    std::shared_ptr<uint8_t> buffer;
  };
  absl::Status Transfer(uint64_t step);

  FeedContext& ctx_;
  // Constant after Setup.
  size_t slot_bytes_ = 0;
  std::shared_ptr<DevicePool> pool_;  // payload buffers
  // One header slot per stream served, on the host and on the device.
  std::vector<std::vector<uint8_t>> host_slots_;
  std::vector<std::shared_ptr<uint8_t>> device_slots_;
  // The leader's thread: this step's messages, staged until EndStep.
  std::vector<Staged> staged_;
};

}  // namespace ddpio::broadcast::internal

#endif  // DDPIO_BROADCAST_INTERNAL_DEVICE_LINK_H_
