#include "ddpio/comm/group_layout.h"

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::comm {
namespace {

TEST(GroupLayout, ContiguousAndStridedAsDesignNamesThem) {
  ASSERT_OK_AND_ASSIGN(GroupLayout c, GroupLayout::Make(6, 3, LayoutKind::kContiguous));
  EXPECT_EQ(c.groups(), (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(c.group_ws(), 2);
  EXPECT_EQ(c.group_rank(4), 1);
  EXPECT_EQ(c.local_group_rank(4), 1);
  EXPECT_EQ(c.leader(4), 3);
  EXPECT_TRUE(c.is_leader(3));
  ASSERT_OK_AND_ASSIGN(GroupLayout s, GroupLayout::Make(6, 2, LayoutKind::kStrided));
  EXPECT_EQ(s.groups(), (std::vector<std::vector<int>>{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(s.group_rank(4), 1);
  EXPECT_EQ(s.local_group_rank(4), 1);
  EXPECT_EQ(s.leader(4), 1);
  ASSERT_OK_AND_ASSIGN(GroupLayout one, GroupLayout::Make(4, 1, LayoutKind::kContiguous));
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(one.is_leader(r));  // everyone reads for itself
}

TEST(GroupLayout, BadLayoutsAreInvalidArgument) {
  EXPECT_CODE(GroupLayout::Make(6, 4, LayoutKind::kContiguous), kInvalidArgument);
  EXPECT_CODE(GroupLayout::Make(0, 1, LayoutKind::kContiguous), kInvalidArgument);
  EXPECT_CODE(GroupLayout::FromGroups(4, {{0, 1}, {1, 2}}), kInvalidArgument);  // overlap
  EXPECT_CODE(GroupLayout::FromGroups(4, {{0, 1}, {2}}), kInvalidArgument);     // sizes differ
  EXPECT_CODE(GroupLayout::FromGroups(4, {{0, 1}, {2, 7}}), kInvalidArgument);  // outside world
  EXPECT_CODE(GroupLayout::FromGroups(6, {{0, 1}, {2, 3}}), kInvalidArgument);  // misses 4, 5
  ASSERT_OK_AND_ASSIGN(GroupLayout e, GroupLayout::FromGroups(4, {{3, 0}, {1, 2}}));
  EXPECT_EQ(e.leader(0), 3);
}

}  // namespace
}  // namespace ddpio::comm
