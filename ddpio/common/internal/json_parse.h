// Parsing JSON that came from outside the process (a manifest in an object store, a dataset's
// metadata, a state file left by an earlier run): bounded in size and nesting before nlohmann's
// parser sees it. Private to ddpio (not installed). nlohmann parses deep nesting fine but copies,
// compares, dumps and destroys values recursively, so a 200 KB array nested 100,000 deep overflows
// the stack later, wherever the value is used. Every JSON from outside goes through ParseJson.
// Thread-safe (pure).
//
//   DDPIO_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, "s3://b/p/ddpio-remote.json"));
#ifndef DDPIO_COMMON_INTERNAL_JSON_PARSE_H_
#define DDPIO_COMMON_INTERNAL_JSON_PARSE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ddpio {

// Deeper than any document ddpio writes (the deepest, a remote manifest, is 4 levels).
inline constexpr int kMaxJsonDepth = 64;

// The parsed value; DataLoss naming `what` for text over `max_bytes`, arrays and objects nested
// deeper than `max_depth`, or text that is not JSON.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& what,
                                         uint64_t max_bytes = uint64_t{64} << 20,
                                         int max_depth = kMaxJsonDepth);

// The deepest nesting of arrays and objects in `text` (strings skipped, escapes honoured), or
// max_depth + 1 as soon as it goes deeper. Linear, no allocation.
int JsonDepth(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace ddpio

#endif  // DDPIO_COMMON_INTERNAL_JSON_PARSE_H_
