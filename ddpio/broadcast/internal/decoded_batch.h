// How a decoded batch is described on the wire, and the check that a received one is the batch
// this rank's sampler expects: shared by the leader's sending side (either transport) and every
// member's consumer side. Pure functions.
#ifndef DDPIO_BROADCAST_INTERNAL_DECODED_BATCH_H_
#define DDPIO_BROADCAST_INTERNAL_DECODED_BATCH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "ddpio/broadcast/feed_message.h"
#include "ddpio/loader/loader.h"
#include "ddpio/sampler/distributed_sampler.h"

namespace ddpio::broadcast::internal {

// The header of a decoded batch: dtype and per-sample shape from the loader's output format
// (uint8 H,W,C or float32 C,H,W), indices, labels and validity from the batch; a CRC32C of the
// payload when it is in host memory.
FeedHeader DecodedHeader(const loader::Batch& batch, const loader::LoaderOptions& options);

// OK when `h` is decoded batch `step` of the plan's epoch for `stream_rank` (`range` of its
// stream) with the shape and dtype `options` produce; DataLoss naming `from` otherwise.
absl::Status CheckDecoded(const FeedHeader& h, const sampler::EpochPlan& plan, int stream_rank,
                          uint64_t step, const sampler::BatchRange& range,
                          const loader::LoaderOptions& options, const std::string& from);

// OK when the host payload of decoded batch `step` hashes to the CRC its header carries (or it
// carries none); DataLoss naming `from` otherwise: a batch damaged on the way is never trained on.
absl::Status CheckDecodedPayload(const FeedHeader& h, const std::vector<uint8_t>& payload,
                                 uint64_t step, const std::string& from);

}  // namespace ddpio::broadcast::internal

#endif  // DDPIO_BROADCAST_INTERNAL_DECODED_BATCH_H_
