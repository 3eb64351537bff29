// The body of a prefix's upload lock object, fetched from the store (anyone may have written it):
// a holder that parses keeps its token and host to at most 256 bytes each, as they go into error
// messages, and only a body within the lock's size bound parses.
#include <cstdint>
#include <string_view>

#include "ddpio/storage/internal/upload_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ddpio::storage::internal::kMaxUploadLockText;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto holder = ddpio::storage::internal::ParseUploadLockHolder(body);
  if (!holder.has_value()) return 0;
  if (size > ddpio::storage::internal::kMaxUploadLockBytes) __builtin_trap();
  if (holder->token.size() > kMaxUploadLockText || holder->host.size() > kMaxUploadLockText) {
    __builtin_trap();
  }
  return 0;
}
