// Group feeder message headers (what a peer receives from its leader) and error payloads.
#include <cstdint>
#include <string_view>
#include <vector>

#include "ddpio/broadcast/feed_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddpio::broadcast::FeedLimits limits;
  limits.max_samples = 4096;
  auto h = ddpio::broadcast::DecodeFeedHeader(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (h.ok()) {
    if (!ddpio::broadcast::ValidateFeedHeader(*h, limits).ok()) __builtin_trap();  // decoded means valid
    auto again = ddpio::broadcast::EncodeFeedHeader(*h);
    if (!again.ok()) __builtin_trap();
  }
  (void)ddpio::broadcast::DecodeFeedError(std::vector<uint8_t>(data, data + size), 3);
  return 0;
}
