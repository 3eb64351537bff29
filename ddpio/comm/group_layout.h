// Group layouts: how a world of ranks splits into groups whose leader reads for the group.
//
// Names: group_size ranks per group, group_ws = world / group_size groups,
// group_rank = which group a rank is in, local_group_rank = its position inside the group,
// leader = the group's first member (group_rank_base for contiguous groups). Layouts:
//   contiguous  groups [0,1,2],[3,4,5]  (one reader per node when group_size = ranks per node)
//   strided     groups [0,3],[1,4],[2,5] (readers spread over nodes)
//   explicit    any list of groups that covers every rank exactly once, all of one size.
// Also the sampler side of group feeding: which ranks' streams a leader reads (shard mode) and
// the sampler options of the group-level stream (replicate mode). Pure arithmetic, no IO.
#ifndef DDPIO_SAMPLER_GROUP_LAYOUT_H_
#define DDPIO_SAMPLER_GROUP_LAYOUT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::comm {

enum class LayoutKind { kContiguous, kStrided, kExplicit };
std::string LayoutKindName(LayoutKind kind);
absl::StatusOr<LayoutKind> ParseLayoutKind(std::string_view name);

class GroupLayout {
 public:
  // InvalidArgument when world < 1, group_size < 1 or group_size does not divide world.
  static absl::StatusOr<GroupLayout> Make(int world_size, int group_size, LayoutKind kind);
  // Explicit groups: InvalidArgument when groups overlap, miss a rank, name a rank outside
  // [0, world), or differ in size.
  static absl::StatusOr<GroupLayout> FromGroups(int world_size,
                                                std::vector<std::vector<int>> groups);

  int world_size() const { return world_size_; }
  int group_size() const { return group_size_; }
  int group_ws() const { return static_cast<int>(groups_.size()); }
  LayoutKind kind() const { return kind_; }
  // Groups in creation order (every rank creates every group's communicator in this order).
  const std::vector<std::vector<int>>& groups() const { return groups_; }

  int group_rank(int rank) const { return group_of_[rank]; }
  int local_group_rank(int rank) const { return local_of_[rank]; }
  // The global rank of the group's leader (its first member).
  int leader(int rank) const { return groups_[group_of_[rank]][0]; }
  bool is_leader(int rank) const { return local_of_[rank] == 0; }
  const std::vector<int>& members(int rank) const { return groups_[group_of_[rank]]; }

 private:
  int world_size_ = 0;
  int group_size_ = 0;
  LayoutKind kind_ = LayoutKind::kContiguous;
  std::vector<std::vector<int>> groups_;
  std::vector<int> group_of_;
  std::vector<int> local_of_;
};

}  // namespace ddpio::comm

#endif  // DDPIO_SAMPLER_GROUP_LAYOUT_H_
