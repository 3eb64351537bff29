// The shuffle-quality statistics tell a mixed order from one that keeps neighbours together.
#include "ddpio/sampler/shuffle_quality.h"

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::sampler {
namespace {

EpochPlan PlanWith(Order order, bool shuffle, uint64_t window = 16) {
  SamplerOptions o;
  o.dataset_size = 100000;
  o.num_replicas = 4;
  o.shuffle = shuffle;
  o.order = order;
  o.block = {64, window, 0};
  auto s = DistributedSampler::Create(o);
  EXPECT_OK(s);
  return *s->Plan(0);
}

TEST(ShuffleQuality, TheExactShuffleLooksLikeIidDrawsAndASequentialReadDoesNot) {
  const ShuffleQuality exact = MeasureShuffleQuality(PlanWith(Order::kExact, true), 100, 64);
  EXPECT_EQ(exact.batches, 4u * (25000 / 64));
  EXPECT_NEAR(exact.distinct_classes, exact.iid_distinct_classes, 0.5);
  EXPECT_NEAR(exact.position_jump, 1.0 / 3.0, 0.01);
  EXPECT_NEAR(exact.class_distance, exact.iid_class_distance, 0.02);
  const ShuffleQuality sequential = MeasureShuffleQuality(PlanWith(Order::kExact, false), 100, 64);
  EXPECT_LE(sequential.distinct_classes, 2.0);
  EXPECT_GT(sequential.class_distance, 0.95);
  EXPECT_LT(sequential.position_jump, 0.001);
}

TEST(ShuffleQuality, TheBlockOrderMixesMoreClassesPerBatchAsItsWindowGrows) {
  double previous = 0;
  for (uint64_t window : {1u, 4u, 16u, 64u}) {
    const ShuffleQuality q = MeasureShuffleQuality(PlanWith(Order::kBlock, true, window), 100, 64);
    EXPECT_GT(q.distinct_classes, previous) << "window " << window;
    previous = q.distinct_classes;
  }
  const ShuffleQuality exact = MeasureShuffleQuality(PlanWith(Order::kExact, true), 100, 64);
  EXPECT_LT(previous, exact.distinct_classes + 1e-9);
}

}  // namespace
}  // namespace ddpio::sampler
