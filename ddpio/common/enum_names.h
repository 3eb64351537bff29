// One way to name an enum's values and parse the names back, for flags and JSON:
//
//   constexpr EnumName<FeedMode> kFeedModes[] = {{FeedMode::kShard, "shard"},
//   {FeedMode::kReplicate, "replicate"}}; std::string FeedModeName(FeedMode m) { return
//   NameOf(kFeedModes, m); } absl::StatusOr<FeedMode> ParseFeedMode(std::string_view s) { return
//   ParseName(kFeedModes, s, "feed mode"); }
//
// ParseName's error names what was parsed and lists the accepted names.
#ifndef DDPIO_COMMON_ENUM_NAMES_H_
#define DDPIO_COMMON_ENUM_NAMES_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ddpio {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

template <typename E, size_t N>
std::string NameOf(const EnumName<E> (&table)[N], E value) {
  for (const auto& e : table) {
    if (e.value == value) return e.name;
  }
  return absl::StrCat("unknown(", static_cast<int>(value), ")");
}

template <typename E, size_t N>
absl::StatusOr<E> ParseName(const EnumName<E> (&table)[N], std::string_view name,
                            std::string_view what) {
  std::string accepted;
  for (const auto& e : table) {
    if (name == e.name) return e.value;
    absl::StrAppend(&accepted, accepted.empty() ? "" : ", ", e.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", std::string(what), " '", std::string(name), "' (", accepted, ")"));
}

}  // namespace ddpio

#endif  // DDPIO_COMMON_ENUM_NAMES_H_
