// The bounded parser every JSON from outside goes through (common/internal/json_parse.h). A value
// it returns is copied, dumped and compared here, all recursive in nlohmann: nesting that slipped
// past the depth check (a string's escapes misread, say) overflows the stack and is a crash.
#include <cstdint>
#include <string>
#include <string_view>

#include "ddpio/common/internal/json_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const int depth = ddpio::JsonDepth(text);
  if (depth < 0 || depth > ddpio::kMaxJsonDepth + 1) __builtin_trap();
  auto parsed = ddpio::ParseJson(text, "fuzz");
  if (!parsed.ok()) return 0;
  if (depth > ddpio::kMaxJsonDepth) __builtin_trap();  // too deep, yet accepted
  const nlohmann::json copy = *parsed;
  if (copy != *parsed) __builtin_trap();
  // Names are bytes: replace invalid UTF-8 rather than throw, as ddpio's writers do.
  const std::string dumped = copy.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // What was dumped parses again within the same bounds (dump adds no nesting).
  if (!ddpio::ParseJson(dumped, "fuzz dump").ok()) __builtin_trap();
  return 0;
}
