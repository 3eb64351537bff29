// Property tests: thousands of random configurations, each checked against the definitions.
#include "ddpio/sampler/distributed_sampler.h"

#include <map>
#include <random>

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::sampler {
namespace {

struct Config {
  uint64_t n;
  int world;
  uint64_t seed;
  uint64_t epoch;
  bool shuffle;
  PermutationKind kind;
};

std::vector<Config> RandomConfigs(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Config> out;
  for (int i = 0; i < count; ++i) {
    Config c;
    c.n = rng() % 4 == 0 ? rng() % 8 : rng() % 600;  // include tiny and empty datasets
    c.world = 1 + static_cast<int>(rng() % 16);
    c.seed = rng() % 1000;
    c.epoch = rng() % 5;
    c.shuffle = rng() % 5 != 0;
    c.kind = rng() % 3 == 0 ? PermutationKind::kFeistel : PermutationKind::kTorch;
    out.push_back(c);
  }
  return out;
}

EpochPlan MakePlan(const Config& c, Padding padding) {
  SamplerOptions o{c.n, c.world, c.shuffle, c.seed, padding, c.kind};
  auto s = DistributedSampler::Create(o);
  EXPECT_OK(s);
  auto plan = s->Plan(c.epoch);
  EXPECT_OK(plan);
  return *plan;
}

std::string Describe(const Config& c) {
  return "n=" + std::to_string(c.n) + " R=" + std::to_string(c.world) +
         " seed=" + std::to_string(c.seed) + " epoch=" + std::to_string(c.epoch) +
         " shuffle=" + std::to_string(c.shuffle) + " " + PermutationKindName(c.kind);
}

TEST(SamplerProperties, PadGivesEveryRankCeilAndEverySampleAtLeastOnce) {
  for (const Config& c : RandomConfigs(3000, 1)) {
    EpochPlan plan = MakePlan(c, Padding::kPad);
    const uint64_t per_rank = (c.n + c.world - 1) / c.world;
    std::map<uint64_t, int> seen;
    for (int r = 0; r < c.world; ++r) {
      RankStream s = plan.Stream(r);
      ASSERT_EQ(s.indices.size(), per_rank) << Describe(c);
      for (uint64_t v : s.indices) ++seen[v];
    }
    ASSERT_EQ(seen.size(), c.n) << Describe(c);
    if (c.n >= static_cast<uint64_t>(c.world)) {
      for (auto [v, k] : seen) ASSERT_LE(k, 2) << Describe(c);  // duplicates at most once
    }
  }
}

TEST(SamplerProperties, DropGivesFloorAndNoSampleTwice) {
  for (const Config& c : RandomConfigs(3000, 2)) {
    EpochPlan plan = MakePlan(c, Padding::kDrop);
    std::map<uint64_t, int> seen;
    for (int r = 0; r < c.world; ++r) {
      RankStream s = plan.Stream(r);
      ASSERT_EQ(s.indices.size(), c.n / c.world) << Describe(c);
      EXPECT_TRUE(s.padded.empty());
      for (uint64_t v : s.indices) ASSERT_EQ(++seen[v], 1) << Describe(c);
    }
    ASSERT_EQ(seen.size(), (c.n / c.world) * c.world) << Describe(c);
  }
}

TEST(SamplerProperties, NoneGivesEverySampleExactlyOnceWithCountsWithinOne) {
  for (const Config& c : RandomConfigs(3000, 3)) {
    EpochPlan plan = MakePlan(c, Padding::kNone);
    std::map<uint64_t, int> seen;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < c.world; ++r) {
      RankStream s = plan.Stream(r);
      lo = std::min<uint64_t>(lo, s.indices.size());
      hi = std::max<uint64_t>(hi, s.indices.size());
      for (uint64_t v : s.indices) ASSERT_EQ(++seen[v], 1) << Describe(c);
    }
    ASSERT_EQ(seen.size(), c.n) << Describe(c);
    ASSERT_LE(hi - lo, 1u) << Describe(c);
    ASSERT_EQ(plan.NumSteps(), hi);
  }
}

TEST(SamplerProperties, MaskFlagsExactlyTheDuplicatesOfPad) {
  for (const Config& c : RandomConfigs(3000, 4)) {
    EpochPlan pad = MakePlan(c, Padding::kPad), mask = MakePlan(c, Padding::kMask);
    std::map<uint64_t, int> unflagged;
    uint64_t flagged = 0;
    for (int r = 0; r < c.world; ++r) {
      RankStream p = pad.Stream(r), m = mask.Stream(r);
      ASSERT_EQ(p.indices, m.indices) << Describe(c);  // same samples as pad
      std::vector<bool> is_pad(m.indices.size(), false);
      for (uint64_t pos : m.padded) is_pad[pos] = true;
      flagged += m.padded.size();
      for (size_t j = 0; j < m.indices.size(); ++j) {
        if (!is_pad[j]) {
          ASSERT_EQ(++unflagged[m.indices[j]], 1) << Describe(c);
        }
      }
    }
    // Leaving the flagged entries out leaves every sample exactly once: metrics summed over
    // ranks equal single-process metrics.
    ASSERT_EQ(unflagged.size(), c.n) << Describe(c);
    ASSERT_EQ(flagged, pad.NumSamples(0) * c.world - c.n) << Describe(c);
  }
}

TEST(SamplerProperties, DeterministicAndEpochsDiffer) {
  int differing = 0, compared = 0;
  for (const Config& c : RandomConfigs(500, 5)) {
    EpochPlan a = MakePlan(c, Padding::kPad), b = MakePlan(c, Padding::kPad);
    Config next = c;
    ++next.epoch;
    EpochPlan other = MakePlan(next, Padding::kPad);
    for (int r = 0; r < c.world; ++r) ASSERT_EQ(a.Stream(r).indices, b.Stream(r).indices);
    if (c.shuffle && c.n >= 50) {
      ++compared;
      differing += a.Stream(0).indices != other.Stream(0).indices;
    }
  }
  EXPECT_GT(compared, 50);
  EXPECT_EQ(differing, compared);
}

TEST(Sampler, InvalidArguments) {
  EXPECT_CODE(DistributedSampler::Create({10, 0}), kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(DistributedSampler s, DistributedSampler::Create({10, 2}));
  EXPECT_CODE(s.Plan(0, 11), kInvalidArgument);
  EXPECT_OK(s.Plan(0, 10));
  EXPECT_CODE(ParsePadding("sometimes"), kInvalidArgument);
}

TEST(Sampler, RepeatedEpochWithoutSetEpochWarns) {
  ASSERT_OK_AND_ASSIGN(DistributedSampler s, DistributedSampler::Create({100, 4}));
  for (uint64_t e = 0; e < 3; ++e) {
    s.SetEpoch(e);
    ASSERT_OK(s.NextPlan());
  }
  EXPECT_FALSE(s.warned_repeated_epoch());
  ASSERT_OK(s.NextPlan());  // epoch 2 again: the forgotten set_epoch
  EXPECT_TRUE(s.warned_repeated_epoch());
  SamplerOptions no_shuffle{100, 4};
  no_shuffle.shuffle = false;
  ASSERT_OK_AND_ASSIGN(DistributedSampler ordered, DistributedSampler::Create(no_shuffle));
  ASSERT_OK(ordered.NextPlan());
  ASSERT_OK(ordered.NextPlan());
  EXPECT_FALSE(ordered.warned_repeated_epoch());  // nothing to forget without shuffling
}

// PyTorch's BatchSampler(sampler, batch_size, drop_last) over a stream of 10: [0..3) [3..6)
// [6..9) [9..10), or without the last with drop_last.
TEST(Batches, MatchBatchSampler) {
  auto b = MakeBatches(10, 3, false);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[3].begin, 9u);
  EXPECT_EQ(b[3].end, 10u);
  EXPECT_EQ(MakeBatches(10, 3, true).size(), 3u);
  EXPECT_EQ(MakeBatches(9, 3, true).size(), 3u);
  EXPECT_EQ(MakeBatches(2, 3, true).size(), 0u);
  EXPECT_EQ(MakeBatches(0, 3, false).size(), 0u);
}

}  // namespace
}  // namespace ddpio::sampler
