// The block order: a permutation the sampler deals like the exact one, keeping each replica to a
// few chunks at a time.
#include "ddpio/sampler/block_order.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ddpio/sampler/distributed_sampler.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::sampler {
namespace {

SamplerOptions BlockOptions(uint64_t n, int world, Padding padding, uint64_t chunk, uint64_t window,
                            uint64_t lanes = 0, bool shuffle = true) {
  SamplerOptions o;
  o.dataset_size = n;
  o.num_replicas = world;
  o.shuffle = shuffle;
  o.seed = 23;
  o.padding = padding;
  o.order = Order::kBlock;
  o.block = {chunk, window, lanes};
  return o;
}

EpochPlan PlanOf(const SamplerOptions& o, uint64_t epoch, uint64_t start = 0) {
  auto s = DistributedSampler::Create(o);
  EXPECT_OK(s);
  auto plan = s->Plan(epoch, start);
  EXPECT_OK(plan);
  return *plan;
}

// The most chunks of a stream started and not finished at any point of it.
uint64_t MostOpenChunks(const std::vector<uint64_t>& stream, uint64_t chunk) {
  std::map<uint64_t, uint64_t> last;  // chunk -> last place in the stream
  for (uint64_t j = 0; j < stream.size(); ++j) last[stream[j] / chunk] = j;
  std::set<uint64_t> open;
  uint64_t most = 0;
  for (uint64_t j = 0; j < stream.size(); ++j) {
    const uint64_t c = stream[j] / chunk;
    open.insert(c);
    most = std::max<uint64_t>(most, open.size());
    if (last[c] == j) open.erase(c);
  }
  return most;
}

TEST(BlockOrder, IsAPermutationForAnySizeChunkWindowAndLanes) {
  std::mt19937_64 rng(5);
  for (int t = 0; t < 400; ++t) {
    const uint64_t n = rng() % 700;
    const BlockOrder b{1 + rng() % 50, 1 + rng() % 8, 1 + rng() % 9};
    const Permutation p =
        MakeBlockOrder(n, rng(), rng() % 2 == 0, PermutationKind::kTorch, b, b.lanes);
    EXPECT_EQ(p.memory_bytes(), n * sizeof(uint32_t));
    std::vector<uint64_t> e(n);
    for (uint64_t i = 0; i < n; ++i) e[i] = p.At(i);
    std::sort(e.begin(), e.end());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(e[i], i) << "n=" << n << " t=" << t;
  }
}

TEST(BlockOrder, IsAFunctionOfSeedAndEpochAndChangesWithThem) {
  const SamplerOptions o = BlockOptions(1000, 4, Padding::kPad, 20, 4);
  EXPECT_EQ(PlanOf(o, 3).Stream(1).indices, PlanOf(o, 3).Stream(1).indices);
  EXPECT_NE(PlanOf(o, 3).Stream(1).indices, PlanOf(o, 4).Stream(1).indices);
  SamplerOptions other = o;
  other.seed = 24;
  EXPECT_NE(PlanOf(o, 3).Stream(1).indices, PlanOf(other, 3).Stream(1).indices);
  // The Feistel kind permutes the chunks its own way.
  other = o;
  other.permutation = PermutationKind::kFeistel;
  EXPECT_NE(PlanOf(o, 3).Stream(1).indices, PlanOf(other, 3).Stream(1).indices);
}

TEST(BlockOrder, EachReplicaHasAtMostWindowPlusTwoChunksOpenAndItsOwnChunks) {
  for (uint64_t window : {1u, 3u, 8u}) {
    for (int world : {1, 3, 8}) {
      const uint64_t chunk = 25, n = 5003;
      const EpochPlan plan = PlanOf(BlockOptions(n, world, Padding::kNone, chunk, window), 1);
      EXPECT_EQ(plan.lanes(), static_cast<uint64_t>(world));
      std::map<uint64_t, std::set<int>> readers;  // chunk -> replicas reading it
      for (int r = 0; r < world; ++r) {
        const RankStream s = plan.Stream(r);
        EXPECT_LE(MostOpenChunks(s.indices, chunk), window + 2)
            << "window " << window << " world " << world << " rank " << r;
        for (uint64_t i : s.indices) readers[i / chunk].insert(r);
      }
      // Chunks are dealt as consecutive runs: only a run's edges are shared.
      uint64_t shared = 0;
      for (const auto& [c, who] : readers) shared += who.size() > 1 ? 1 : 0;
      EXPECT_LE(shared, static_cast<uint64_t>(world - 1)) << "world " << world;
    }
  }
}

TEST(BlockOrder, TheWindowSpreadsAReplicasSamplesOverItsChunks) {
  // Consecutive samples from one chunk: ~1/window when the window spreads them, nearly always
  // when it is a single chunk.
  auto same_chunk_share = [](uint64_t window) {
    const uint64_t chunk = 50;
    const RankStream s = PlanOf(BlockOptions(20000, 2, Padding::kPad, chunk, window), 0).Stream(0);
    uint64_t same = 0;
    for (uint64_t j = 1; j < s.indices.size(); ++j) {
      same += s.indices[j] / chunk == s.indices[j - 1] / chunk ? 1 : 0;
    }
    return static_cast<double>(same) / static_cast<double>(s.indices.size() - 1);
  };
  EXPECT_LT(same_chunk_share(16), 0.15);
  EXPECT_GT(same_chunk_share(1), 0.45);
  // Not the chunk's own order: records of a chunk come out shuffled.
  const RankStream s = PlanOf(BlockOptions(2000, 1, Padding::kPad, 100, 4), 0).Stream(0);
  EXPECT_FALSE(std::is_sorted(s.indices.begin(), s.indices.begin() + 100));
}

TEST(BlockOrder, WithoutShuffleEachLaneIsAContiguousRunInOrder) {
  const EpochPlan plan = PlanOf(BlockOptions(103, 4, Padding::kNone, 10, 4, 0, false), 7);
  uint64_t next = 0;
  for (int r = 0; r < 4; ++r) {
    for (uint64_t i : plan.Stream(r).indices) EXPECT_EQ(i, next++) << "rank " << r;
  }
  EXPECT_EQ(next, 103u);
}

TEST(BlockOrder, EverySampleExactlyOnceAcrossReplicasWithThePaddingRulesOfExact) {
  for (Padding padding : {Padding::kPad, Padding::kDrop, Padding::kNone, Padding::kMask}) {
    for (uint64_t n : {0u, 1u, 7u, 1001u}) {
      const int world = 4;
      const EpochPlan block = PlanOf(BlockOptions(n, world, padding, 9, 3), 2);
      SamplerOptions exact_options = BlockOptions(n, world, padding, 9, 3);
      exact_options.order = Order::kExact;
      const EpochPlan exact = PlanOf(exact_options, 2);
      std::map<uint64_t, int> real, padded;
      for (int r = 0; r < world; ++r) {
        ASSERT_EQ(block.NumSamples(r), exact.NumSamples(r));
        const RankStream s = block.Stream(r);
        ASSERT_EQ(s.padded, exact.Stream(r).padded) << PaddingName(padding) << " n=" << n;
        for (uint64_t j = 0; j < s.indices.size(); ++j) {
          (block.IsPadding(r, j) ? padded : real)[s.indices[j]]++;
        }
      }
      const uint64_t dropped = padding == Padding::kDrop ? n % world : 0;
      EXPECT_EQ(real.size(), n - dropped) << PaddingName(padding) << " n=" << n;
      for (const auto& [i, count] : real) EXPECT_EQ(count, 1) << "sample " << i;
      for (const auto& [i, count] : padded) EXPECT_EQ(real.count(i), 1u) << "padding " << i;
    }
  }
}

TEST(BlockOrder, ResumesOnTheSameWorldAndOnAnotherWithTheRecordedLanesExactlyOnce) {
  std::mt19937_64 rng(11);
  for (int t = 0; t < 300; ++t) {
    const uint64_t n = 1 + rng() % 500;
    const int world = 1 + static_cast<int>(rng() % 6);
    const int next_world = 1 + static_cast<int>(rng() % 6);
    const SamplerOptions first =
        BlockOptions(n, world, Padding::kNone, 1 + rng() % 20, 1 + rng() % 5);
    const EpochPlan full = PlanOf(first, 4);
    const uint64_t steps = rng() % (full.NumSteps() + 1);
    const uint64_t start = full.ConsumedAfter(steps);
    // Same world: the uninterrupted streams from that step on.
    const EpochPlan again = PlanOf(first, 4, start);
    for (int r = 0; r < world; ++r) {
      const std::vector<uint64_t> a = full.Stream(r).indices;
      const std::vector<uint64_t> tail(a.begin() + std::min<uint64_t>(steps, a.size()), a.end());
      ASSERT_EQ(again.Stream(r).indices, tail) << "t=" << t;
    }
    // Another world keeping the lanes the epoch was planned with.
    SamplerOptions moved = first;
    moved.num_replicas = next_world;
    moved.block.lanes = full.lanes();
    const EpochPlan resumed = PlanOf(moved, 4, start);
    std::map<uint64_t, int> seen;
    for (int r = 0; r < world; ++r) {
      const std::vector<uint64_t> a = full.Stream(r).indices;
      for (uint64_t j = 0; j < std::min<uint64_t>(steps, a.size()); ++j) seen[a[j]]++;
    }
    for (int r = 0; r < next_world; ++r) {
      for (uint64_t i : resumed.Stream(r).indices) seen[i]++;
    }
    ASSERT_EQ(seen.size(), n) << "t=" << t;
    for (const auto& [i, count] : seen) ASSERT_EQ(count, 1) << "t=" << t << " sample " << i;
  }
}

TEST(BlockOrder, RefusesAZeroChunkOrWindowNamingIt) {
  auto message = [](const SamplerOptions& o) {
    absl::Status s = DistributedSampler::Create(o).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_NE(message(BlockOptions(10, 1, Padding::kPad, 0, 4)).find("block_chunk"),
            std::string::npos);
  EXPECT_NE(message(BlockOptions(10, 1, Padding::kPad, 4, 0)).find("block_window"),
            std::string::npos);
  EXPECT_CODE(ParseOrder("blocks").status(), kInvalidArgument);
  EXPECT_EQ(OrderName(*ParseOrder("block")), "block");
}

}  // namespace
}  // namespace ddpio::sampler
