#include "ddpio/loader/augment.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ddpio::loader {
namespace {

TEST(RandomResizedCrop, ParametersStayWithinTorchvisionBounds) {
  AugmentOptions o;
  for (auto [w, h] :
       {std::pair{500, 375}, std::pair{375, 500}, std::pair{64, 64}, std::pair{1000, 40}}) {
    int outside = 0;
    for (uint64_t i = 0; i < 3000; ++i) {
      CropParams c = RandomResizedCropParams(w, h, o, 1, 2, i, nullptr);
      ASSERT_GT(c.w, 0);
      ASSERT_GT(c.h, 0);
      ASSERT_GE(c.i, 0);
      ASSERT_GE(c.j, 0);
      ASSERT_LE(c.j + c.w, w);
      ASSERT_LE(c.i + c.h, h);
      const double area = static_cast<double>(c.w) * c.h / (static_cast<double>(w) * h);
      const double ratio = static_cast<double>(c.w) / c.h;
      // Integer rounding of w and h moves area and ratio a little on small images.
      const double tol = 2.0 / std::min(c.w, c.h);
      outside += area < o.scale_min * (1 - 2 * tol) || area > o.scale_max * (1 + 2 * tol) ||
                 ratio < o.ratio_min * (1 - tol) || ratio > o.ratio_max * (1 + tol);
    }
    if (w / h > 4) {
      // A 25:1 strip never fits a 3/4..4/3 crop of 8%+ of its area: always the fallback, which
      // is the central crop at the largest allowed ratio.
      CropParams c = RandomResizedCropParams(w, h, o, 1, 2, 0, nullptr);
      EXPECT_EQ(c.h, 40);
      EXPECT_EQ(c.w, 53);  // round(40 * 4/3)
      EXPECT_EQ(c.j, (1000 - 53) / 2);
    } else {
      EXPECT_EQ(outside, 0) << w << "x" << h;
    }
  }
}

TEST(RandomResizedCrop, DistributionMatchesTheDefinition) {
  // torchvision draws area A ~ U(0.08, 1) and log r ~ U(log 3/4, log 4/3) and retries when the
  // crop does not fit. On a square image, A <= 3/4 always fits; A > 3/4 fits with probability
  // -ln(A) / ln(4/3). So accepted areas have density p(A) = 1 below 3/4 and -ln(A)/ln(4/3)
  // above: compute its mean and compare (retries beyond 10 are negligible here).
  double num = 0, den = 0;
  const int steps = 200000;
  for (int k = 0; k < steps; ++k) {
    double area = 0.08 + (k + 0.5) * (0.92 / steps);
    double p = area <= 0.75 ? 1.0 : -std::log(area) / std::log(4.0 / 3.0);
    num += area * p;
    den += p;
  }
  const double expected_mean_area = num / den;
  AugmentOptions o;
  double area_sum = 0, log_ratio_sum = 0;
  int flips = 0;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    bool flip = false;
    CropParams c = RandomResizedCropParams(2000, 2000, o, 7, 0, i, &flip);
    area_sum += static_cast<double>(c.w) * c.h / 4e6;
    log_ratio_sum += std::log(static_cast<double>(c.w) / c.h);
    flips += flip;
  }
  EXPECT_NEAR(area_sum / n, expected_mean_area, 0.005);
  EXPECT_NEAR(log_ratio_sum / n, 0.0, 0.005);  // acceptance is symmetric in log r
  EXPECT_NEAR(flips / static_cast<double>(n), 0.5, 0.01);
}

TEST(RandomResizedCrop, FallbackIsTheCentralCrop) {
  AugmentOptions o;
  o.scale_min = o.scale_max = 1.0;  // the whole area at a ratio in [3/4, 4/3]: impossible for 4:1
  CropParams c = RandomResizedCropParams(400, 100, o, 0, 0, 0, nullptr);
  EXPECT_EQ(c.h, 100);
  EXPECT_EQ(c.w, 133);  // round(100 * 4/3)
  EXPECT_EQ(c.j, (400 - 133) / 2);
  EXPECT_EQ(c.i, 0);
}

TEST(Augment, DeterministicPerSeedEpochIndex) {
  AugmentOptions o;
  SampleGeometry a = PlanSample(500, 375, o, 3, 4, 5), b = PlanSample(500, 375, o, 3, 4, 5);
  EXPECT_EQ(a.box.x0, b.box.x0);
  EXPECT_EQ(a.box.y1, b.box.y1);
  EXPECT_EQ(a.flip, b.flip);
  int differ = 0;
  for (uint64_t e = 0; e < 20; ++e) {
    SampleGeometry g = PlanSample(500, 375, o, 3, e, 5);
    differ += g.box.x0 != a.box.x0 || g.box.y0 != a.box.y0 || g.box.x1 != a.box.x1;
  }
  EXPECT_GE(differ, 18);  // other epochs, other crops
}

TEST(Augment, EvalGeometryIsResizeThenCenterCrop) {
  AugmentOptions o;
  o.train = false;  // Resize(256) + CenterCrop(224)
  SampleGeometry g = PlanSample(500, 375, o, 0, 0, 0);
  // Resize: 375 -> 256, 500 -> int(256 * 500 / 375) = 341. CenterCrop: left = round(58.5) = 58
  // (half to even, as Python), top = round(16) = 16. Box = crop scaled back by 500/341, 375/256.
  EXPECT_FALSE(g.flip);
  EXPECT_NEAR(g.box.x0, 58 * 500.0 / 341, 1e-9);
  EXPECT_NEAR(g.box.y0, 16 * 375.0 / 256, 1e-9);
  EXPECT_NEAR(g.box.x1, (58 + 224) * 500.0 / 341, 1e-9);
  EXPECT_NEAR(g.box.y1, (16 + 224) * 375.0 / 256, 1e-9);
  SampleGeometry again = PlanSample(500, 375, o, 9, 9, 9);  // no randomness in eval
  EXPECT_EQ(again.box.x0, g.box.x0);
}

}  // namespace
}  // namespace ddpio::loader
