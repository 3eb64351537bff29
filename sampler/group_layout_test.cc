#include "sampler/group_layout.h"

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::sampler {
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

TEST(GroupLayout, ShardStreamsAreEachMembersOwnStream) {
  ASSERT_OK_AND_ASSIGN(GroupLayout l, GroupLayout::Make(8, 4, LayoutKind::kStrided));
  ASSERT_OK_AND_ASSIGN(DistributedSampler s, DistributedSampler::Create({1003, 8}));
  ASSERT_OK_AND_ASSIGN(EpochPlan plan, s.Plan(2));
  std::vector<RankStream> streams = ShardStreams(plan, l, /*rank=*/5);
  ASSERT_EQ(streams.size(), 4u);
  for (size_t m = 0; m < 4; ++m) EXPECT_EQ(streams[m].indices, plan.Stream(l.members(5)[m]).indices);
}

TEST(GroupLayout, ReplicateSamplesOverGroups) {
  ASSERT_OK_AND_ASSIGN(GroupLayout l, GroupLayout::Make(8, 2, LayoutKind::kContiguous));
  SamplerOptions base{1000, 8};
  SamplerOptions rep = ReplicateOptions(base, l);
  EXPECT_EQ(rep.num_replicas, 4);
  ASSERT_OK_AND_ASSIGN(DistributedSampler s, DistributedSampler::Create(rep));
  ASSERT_OK_AND_ASSIGN(EpochPlan plan, s.Plan(0));
  EXPECT_EQ(plan.Stream(l.group_rank(6)).indices.size(), 250u);
}

}  // namespace
}  // namespace ddpio::sampler
