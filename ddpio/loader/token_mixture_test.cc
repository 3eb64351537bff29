#include "ddpio/loader/token_mixture.h"

#include <cmath>

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::loader {
namespace {

TEST(BlendSources, EveryPrefixKeepsEachSourceWithinTwoOfItsShare) {
  for (const std::vector<double>& w : std::vector<std::vector<double>>{
           {0.7, 0.3}, {1, 1, 1}, {0.05, 0.9, 0.05}, {3, 1, 0.01, 2}}) {
    double total = 0;
    for (double x : w) total += x;
    const uint64_t n = 20000;
    const std::vector<uint32_t> src = BlendSources(w, n);
    std::vector<uint64_t> taken(w.size(), 0);
    double worst = 0;
    for (uint64_t i = 0; i < n; ++i) {
      ++taken[src[i]];
      for (size_t d = 0; d < w.size(); ++d) {
        worst = std::max(worst, std::abs(static_cast<double>(taken[d]) -
                                         w[d] / total * static_cast<double>(i + 1)));
      }
    }
    EXPECT_LE(worst, 2.0) << w.size() << " sources";
    // And the same for the same weights: nothing random.
    EXPECT_EQ(BlendSources(w, n), src);
  }
}

TEST(BlendSources, WeightsWhoseSumOverflowsStillMixByTheirRatio) {
  // 1e308 + 1e308 is infinite: divided by the largest first, they are 1 : 1 : 1e-317.
  const std::vector<uint32_t> src = BlendSources({1e308, 1e308, 1e-9}, 3000);
  std::vector<int> taken(3, 0);
  for (uint32_t d : src) ++taken[d];
  EXPECT_EQ(taken[0], 1500);
  EXPECT_EQ(taken[1], 1500);
  EXPECT_EQ(taken[2], 0);
}

}  // namespace
}  // namespace ddpio::loader
