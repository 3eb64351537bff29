#include "ddpio/trainer/optimizer.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ddpio::trainer {
namespace {

// torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01) on p = [1, -2] with gradients
// [0.5, 0.25] then [0.1, -0.3], by hand: d1 = g1 + 0.01 p0; buf1 = d1; p1 = p0 - 0.1 buf1;
// d2 = g2 + 0.01 p1; buf2 = 0.9 buf1 + d2; p2 = p1 - 0.1 buf2.
TEST(Sgd, MatchesTorchSemantics) {
  std::vector<float> p = {1.0f, -2.0f};
  Sgd sgd(2, 0.9, 0.01);
  sgd.Step(p, {0.5f, 0.25f}, 0.1);
  const double d1a = 0.5 + 0.01 * 1, d1b = 0.25 + 0.01 * -2;
  const double p1a = 1 - 0.1 * d1a, p1b = -2 - 0.1 * d1b;
  EXPECT_NEAR(p[0], p1a, 1e-6);
  EXPECT_NEAR(p[1], p1b, 1e-6);
  sgd.Step(p, {0.1f, -0.3f}, 0.1);
  const double b2a = 0.9 * d1a + (0.1 + 0.01 * p1a), b2b = 0.9 * d1b + (-0.3 + 0.01 * p1b);
  EXPECT_NEAR(p[0], p1a - 0.1 * b2a, 1e-6);
  EXPECT_NEAR(p[1], p1b - 0.1 * b2b, 1e-6);
}

TEST(Schedule, WarmupThenCosineOrStep) {
  Schedule s{1.0, 4, 14, Decay::kCosine, 0, 0.1};
  EXPECT_DOUBLE_EQ(s.At(0), 0.25);
  EXPECT_DOUBLE_EQ(s.At(3), 1.0);
  EXPECT_DOUBLE_EQ(s.At(4), 1.0);
  EXPECT_NEAR(s.At(9), 0.5, 1e-12);  // half way through the decay
  EXPECT_NEAR(s.At(14), 0.0, 1e-12);
  Schedule st{1.0, 0, 100, Decay::kStep, 10, 0.1};
  EXPECT_DOUBLE_EQ(st.At(9), 1.0);
  EXPECT_NEAR(st.At(10), 0.1, 1e-12);
  EXPECT_NEAR(st.At(25), 0.01, 1e-12);
}

}  // namespace
}  // namespace ddpio::trainer
