// How the members of a group agree before feeding: every member describes its settings and its
// dataset, every member checks all of them (so a disagreement fails the whole group at once,
// each member naming the same culprit), and the leader's dataset size reaches every member.
#ifndef DDPIO_BROADCAST_INTERNAL_GROUP_AGREEMENT_H_
#define DDPIO_BROADCAST_INTERNAL_GROUP_AGREEMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/internal/feed_context.h"

namespace ddpio::broadcast::internal {

// The group's agreement, given every member's description (in group order; `ranks` their
// global ranks): OK when every member names the same dataset content (when both say) and the
// same settings; the error of a member that could not open its dataset (its own code) or
// InvalidArgument naming the member, the paths and the settings that differ.
absl::Status CheckGroupAgreement(const std::vector<std::string>& described,
                                 const std::vector<int>& ranks);

// Runs the agreement over ctx.group (a collective: every member calls it once, at creation) and
// returns the leader's dataset size. Fills ctx.options.dataset from ctx.reader when the caller
// named no dataset. The group's errors annotated (Unavailable, DeadlineExceeded), or
// CheckGroupAgreement's.
absl::StatusOr<uint64_t> AgreeOnGroup(FeedContext& ctx);

}  // namespace ddpio::broadcast::internal

#endif  // DDPIO_BROADCAST_INTERNAL_GROUP_AGREEMENT_H_
