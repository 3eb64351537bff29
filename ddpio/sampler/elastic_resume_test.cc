// Resume: same world size reproduces the uninterrupted streams; another world size deals the
// remaining samples exactly once.
#include <map>
#include <random>

#include "ddpio/sampler/distributed_sampler.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::sampler {
namespace {

EpochPlan PlanFor(uint64_t n, int world, Padding padding, uint64_t epoch, uint64_t start,
                  PermutationKind kind = PermutationKind::kTorch) {
  SamplerOptions o{n, world, true, 17, padding, kind};
  auto s = DistributedSampler::Create(o);
  EXPECT_OK(s);
  auto plan = s->Plan(epoch, start);
  EXPECT_OK(plan);
  return *plan;
}

TEST(Resume, SameWorldContinuesTheUninterruptedStreamsExactly) {
  std::mt19937_64 rng(9);
  for (int t = 0; t < 2000; ++t) {
    uint64_t n = rng() % 300;
    int world = 1 + static_cast<int>(rng() % 9);
    Padding padding = static_cast<Padding>(rng() % 4);
    EpochPlan full = PlanFor(n, world, padding, 3, 0);
    uint64_t k = full.NumSteps() == 0 ? 0 : rng() % (full.NumSteps() + 1);
    uint64_t start = full.ConsumedAfter(k);
    EpochPlan resumed = PlanFor(n, world, padding, 3, start);
    for (int r = 0; r < world; ++r) {
      RankStream a = full.Stream(r), b = resumed.Stream(r);
      uint64_t skip = std::min<uint64_t>(k, a.indices.size());
      if (padding == Padding::kDrop && start == n) skip = a.indices.size();
      std::vector<uint64_t> tail(a.indices.begin() + skip, a.indices.end());
      ASSERT_EQ(b.indices, tail) << "n=" << n << " R=" << world << " k=" << k << " "
                                 << PaddingName(padding) << " rank " << r;
      for (uint64_t j = 0; j < b.indices.size(); ++j) {
        ASSERT_EQ(resumed.IsPadding(r, j), full.IsPadding(r, j + skip));
      }
    }
  }
}

TEST(Resume, ConsumedSetIsAPrefixOfThePermutation) {
  for (uint64_t n : {0ull, 1ull, 10ull, 97ull}) {
    for (int world : {1, 3, 8}) {
      EpochPlan plan = PlanFor(n, world, Padding::kPad, 0, 0);
      EpochPlan identity_order = PlanFor(n, 1, Padding::kNone, 0, 0);  // the permutation itself
      for (uint64_t k = 0; k <= plan.NumSteps(); ++k) {
        std::map<uint64_t, int> consumed;
        for (int r = 0; r < world; ++r) {
          for (uint64_t j = 0; j < k; ++j) consumed[plan.IndexAt(r, j)]++;
        }
        uint64_t p = plan.ConsumedAfter(k);
        for (uint64_t i = 0; i < p; ++i)
          ASSERT_EQ(consumed.count(identity_order.IndexAt(0, i)), 1u);
        ASSERT_EQ(consumed.size(), p) << "n=" << n << " R=" << world << " k=" << k;
      }
    }
  }
}

TEST(Resume, ElasticCoversTheRemainderExactlyOnce) {
  std::mt19937_64 rng(10);
  int checked = 0;
  for (int t = 0; t < 4000; ++t) {
    uint64_t n = rng() % 400;
    int world = 1 + static_cast<int>(rng() % 12), world2 = 1 + static_cast<int>(rng() % 12);
    Padding padding = static_cast<Padding>(rng() % 4);
    PermutationKind kind = rng() % 3 == 0 ? PermutationKind::kFeistel : PermutationKind::kTorch;
    EpochPlan first = PlanFor(n, world, padding, 5, 0, kind);
    uint64_t k = first.NumSteps() == 0 ? 0 : rng() % (first.NumSteps() + 1);
    // What the old world really consumed, read from its streams.
    std::map<uint64_t, int> real;
    for (int r = 0; r < world; ++r) {
      for (uint64_t j = 0; j < std::min(k, first.NumSamples(r)); ++j) {
        if (!first.IsPadding(r, j)) {
          real[first.IndexAt(r, j)]++;
        }
      }
    }
    EpochPlan second = PlanFor(n, world2, padding, 5, first.ConsumedAfter(k), kind);
    uint64_t dropped = 0;
    for (int r = 0; r < world2; ++r) {
      for (uint64_t j = 0; j < second.NumSamples(r); ++j) {
        if (!second.IsPadding(r, j)) {
          real[second.IndexAt(r, j)]++;
        }
      }
    }
    for (auto [index, times] : real) {
      ASSERT_EQ(times, 1) << "sample " << index << " repeated: n=" << n << " R=" << world
                          << " k=" << k << " R2=" << world2 << " " << PaddingName(padding);
    }
    if (padding == Padding::kDrop) {
      dropped = n - real.size();
      // The first world's drop, plus at most R2 - 1 of the remainder.
      ASSERT_LE(dropped, static_cast<uint64_t>(world - 1 + world2 - 1));
    } else {
      ASSERT_EQ(real.size(), n) << "n=" << n << " R=" << world << " k=" << k << " R2=" << world2
                                << " " << PaddingName(padding);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4000);
}

}  // namespace
}  // namespace ddpio::sampler
