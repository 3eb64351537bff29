#include "ddpio/broadcast/internal/feed_context.h"

#include "absl/strings/str_cat.h"

namespace ddpio::broadcast::internal {

std::string MemberName(int local, int rank) {
  return absl::StrCat(local == 0 ? "the group leader" : absl::StrCat("group member ", local),
                      " (rank ", rank, ")");
}

std::string FeedContext::MemberName(int local) const {
  return internal::MemberName(local, layout.members(rank)[local]);
}

}  // namespace ddpio::broadcast::internal
