#include "ddpio/comm/group_layout.h"

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"

namespace ddpio::comm {

namespace {
// Explicit layouts are built from a list, never parsed from a flag: the parse table leaves them
// out.
constexpr EnumName<LayoutKind> kLayoutNames[] = {{LayoutKind::kContiguous, "contiguous"},
                                                 {LayoutKind::kStrided, "strided"},
                                                 {LayoutKind::kExplicit, "explicit"}};
constexpr EnumName<LayoutKind> kParsedLayouts[] = {{LayoutKind::kContiguous, "contiguous"},
                                                   {LayoutKind::kStrided, "strided"}};
}  // namespace

std::string LayoutKindName(LayoutKind kind) { return NameOf(kLayoutNames, kind); }
absl::StatusOr<LayoutKind> ParseLayoutKind(std::string_view name) {
  return ParseName(kParsedLayouts, name, "layout");
}

absl::StatusOr<GroupLayout> GroupLayout::Make(int world, int group_size, LayoutKind kind) {
  if (world < 1 || group_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size (", world, ") and group size (",
                                                   group_size, ") must be at least 1"));
  }
  if (world % group_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("group size ", group_size, " does not divide the world size ", world,
                     " (after an elastic restart on fewer ranks, the world must stay a multiple of "
                     "the group size: let the launcher drop whole groups, e.g. torchrun "
                     "--nproc-per-node a multiple of it, or choose the group size per attempt)"));
  }
  if (kind == LayoutKind::kExplicit) {
    return absl::InvalidArgumentError("explicit layouts are made with GroupLayout::FromGroups");
  }
  const int group_ws = world / group_size;
  std::vector<std::vector<int>> groups(group_ws);
  for (int g = 0; g < group_ws; ++g) {
    for (int m = 0; m < group_size; ++m) {
      groups[g].push_back(kind == LayoutKind::kContiguous ? g * group_size + m : g + m * group_ws);
    }
  }
  auto layout = FromGroups(world, std::move(groups));
  if (layout.ok()) layout->kind_ = kind;
  return layout;
}

absl::StatusOr<GroupLayout> GroupLayout::FromGroups(int world,
                                                    std::vector<std::vector<int>> groups) {
  if (world < 1 || groups.empty()) return absl::InvalidArgumentError("empty world or no groups");
  GroupLayout l;
  l.world_size_ = world;
  l.group_size_ = static_cast<int>(groups[0].size());
  l.kind_ = LayoutKind::kExplicit;
  l.group_of_.assign(world, -1);
  l.local_of_.assign(world, -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (static_cast<int>(groups[g].size()) != l.group_size_ || groups[g].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group ", g, " has ", groups[g].size(), " ranks; all groups must have ", l.group_size_));
    }
    for (size_t m = 0; m < groups[g].size(); ++m) {
      int r = groups[g][m];
      if (r < 0 || r >= world) {
        return absl::InvalidArgumentError(
            absl::StrCat("group ", g, " names rank ", r, ", outside [0, ", world, ")"));
      }
      if (l.group_of_[r] != -1) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", r, " is in groups ", l.group_of_[r], " and ", g));
      }
      l.group_of_[r] = static_cast<int>(g);
      l.local_of_[r] = static_cast<int>(m);
    }
  }
  for (int r = 0; r < world; ++r) {
    if (l.group_of_[r] == -1) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r, " is in no group"));
    }
  }
  l.groups_ = std::move(groups);
  return l;
}

}  // namespace ddpio::comm
