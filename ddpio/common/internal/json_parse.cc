#include "ddpio/common/internal/json_parse.h"

#include "absl/strings/str_cat.h"

namespace ddpio {

int JsonDepth(std::string_view text, int max_depth) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > max_depth) return max_depth + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& what,
                                         uint64_t max_bytes, int max_depth) {
  if (text.size() > max_bytes) {
    return absl::DataLossError(
        absl::StrCat(what, " is ", text.size(), " bytes; a valid one is at most ", max_bytes));
  }
  if (JsonDepth(text, max_depth) > max_depth) {
    return absl::DataLossError(
        absl::StrCat(what, " is not valid: its JSON nests deeper than ", max_depth, " levels"));
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat(what, " is not valid JSON"));
  return j;
}

}  // namespace ddpio
