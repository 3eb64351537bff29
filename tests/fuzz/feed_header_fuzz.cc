// Group feeder message headers (what a peer receives from its leader), as a host message and as
// a fixed-size slot, and error payloads.
#include <cstdint>
#include <string_view>
#include <vector>

#include "ddpio/broadcast/feed_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddpio::broadcast::FeedLimits limits;
  limits.max_samples = 4096;
  auto h = ddpio::broadcast::DecodeFeedHeader(
      std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (h.ok()) {
    if (!ddpio::broadcast::ValidateFeedHeader(*h, limits).ok())
      __builtin_trap();  // decoded means valid
    auto again = ddpio::broadcast::EncodeFeedHeader(*h);
    if (!again.ok()) __builtin_trap();
  }
  const std::vector<uint8_t> bytes(data, data + size);
  (void)ddpio::broadcast::DecodeFeedError(bytes, 3);
  // The same bytes as a fixed-size header slot (the NCCL feeder's header message).
  auto s = ddpio::broadcast::DecodeFeedSlot(bytes, limits, "the fuzzer");
  if (s.ok()) {
    std::vector<uint8_t> again(bytes.size());
    if (!ddpio::broadcast::EncodeFeedSlot(*s, &again).ok())
      __builtin_trap();  // what decoded fits again
  }
  return 0;
}
