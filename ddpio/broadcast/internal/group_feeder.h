// Pieces the GroupFeeder's leader and consumer sides share: how a decoded batch is described on
// the wire, and the check that a received batch is the one this rank's sampler expects.
#ifndef DDPIO_BROADCAST_INTERNAL_GROUP_FEEDER_H_
#define DDPIO_BROADCAST_INTERNAL_GROUP_FEEDER_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ddpio/broadcast/feed_message.h"
#include "ddpio/broadcast/group_feeder.h"
#include "ddpio/loader/loader.h"
#include "ddpio/sampler/distributed_sampler.h"

namespace ddpio::broadcast {

// A stream the leader serves: one member's (shard) or the group's, sent to every member
// (replicate).
struct GroupFeeder::Member {
  std::vector<int> to;  // group-local ranks that get this stream
  int stream = 0;       // its rank in the sampler's plan
  std::vector<sampler::BatchRange> batches;
  std::unique_ptr<loader::Loader> loader;  // decoded: reads, decodes and augments this stream
  bool done = false;
};

namespace internal {

// The group's agreement, given every member's description (in group order; `ranks` their
// global ranks): OK when every member names the same dataset content (when both say) and the
// same settings; the error of a member that could not open its dataset (its own code) or
// InvalidArgument naming the member, the paths and the settings that differ.
absl::Status CheckGroupAgreement(const std::vector<std::string>& described, const std::vector<int>& ranks);

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
  std::vector<std::shared_ptr<uint8_t>> free_;
};

// The header of a decoded batch: dtype and per-sample shape from the loader's output format
// (uint8 H,W,C or float32 C,H,W), indices, labels and validity from the batch.
FeedHeader DecodedHeader(const loader::Batch& batch, const loader::LoaderOptions& options);

// OK when `h` is decoded batch `step` of the plan's epoch for `stream_rank` (`range` of its
// stream) with the shape and dtype `options` produce; DataLoss naming `from` otherwise.
absl::Status CheckDecoded(const FeedHeader& h, const sampler::EpochPlan& plan, int stream_rank, uint64_t step,
                          const sampler::BatchRange& range, const loader::LoaderOptions& options,
                          const std::string& from);

}  // namespace internal
}  // namespace ddpio::broadcast

#endif  // DDPIO_BROADCAST_INTERNAL_GROUP_FEEDER_H_
