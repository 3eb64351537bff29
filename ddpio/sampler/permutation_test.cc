#include "ddpio/sampler/permutation.h"

#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace ddpio::sampler {
namespace {

bool IsPermutation(const Permutation& p) {
  std::vector<bool> seen(p.size(), false);
  for (uint64_t i = 0; i < p.size(); ++i) {
    uint64_t v = p.At(i);
    if (v >= p.size() || seen[v]) return false;
    seen[v] = true;
  }
  return true;
}

TEST(Permutation, EveryKindIsABijectionForAwkwardSizes) {
  for (PermutationKind kind :
       {PermutationKind::kTorch, PermutationKind::kTorchLegacy, PermutationKind::kFeistel}) {
    for (uint64_t n : {0ull, 1ull, 2ull, 3ull, 7ull, 8ull, 9ull, 255ull, 256ull, 257ull, 1000ull,
                       4097ull, 65537ull}) {
      for (uint64_t seed : {0ull, 1ull, 12345ull}) {
        Permutation p = Permutation::Make(n, seed, true, kind);
        ASSERT_EQ(p.size(), n);
        EXPECT_TRUE(IsPermutation(p))
            << PermutationKindName(kind) << " n=" << n << " seed=" << seed;
      }
    }
  }
}

TEST(Permutation, SeedsChangeTheOrderAndShuffleOffIsIdentity) {
  for (PermutationKind kind : {PermutationKind::kTorch, PermutationKind::kFeistel}) {
    Permutation a = Permutation::Make(1000, 5, true, kind),
                b = Permutation::Make(1000, 6, true, kind);
    int same = 0, fixed = 0;
    for (uint64_t i = 0; i < 1000; ++i) {
      same += a.At(i) == b.At(i);
      fixed += a.At(i) == i;
    }
    EXPECT_LT(same, 20) << PermutationKindName(kind);  // ~1 expected by chance
    EXPECT_LT(fixed, 20) << PermutationKindName(kind);
    Permutation id = Permutation::Make(1000, 5, false, kind);
    for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(id.At(i), i);
  }
}

TEST(Permutation, CompactStorage) {
  EXPECT_EQ(Permutation::Make(1281167, 0, true, PermutationKind::kTorch).memory_bytes(),
            1281167u * 4);  // 4 bytes per sample
  EXPECT_EQ(Permutation::Make(uint64_t{1} << 40, 0, true, PermutationKind::kFeistel).memory_bytes(),
            0u);  // O(1): 2^40 samples
  Permutation huge = Permutation::Make(uint64_t{1} << 40, 3, true, PermutationKind::kFeistel);
  std::set<uint64_t> some;
  for (uint64_t i = 0; i < 10000; ++i) {
    uint64_t v = huge.At(i * 7919);
    ASSERT_LT(v, uint64_t{1} << 40);
    some.insert(v);
  }
  EXPECT_EQ(some.size(), 10000u);  // distinct positions map to distinct values
}

TEST(TorchRandperm, StorageWidthDoesNotChangeTheResult) {
  std::vector<uint32_t> a(5000);
  std::vector<uint64_t> b(5000);
  TorchRandperm(5000, 77, false, a.data());
  TorchRandperm(5000, 77, false, b.data());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]);
}

// torch.Generator.manual_seed keeps the low 32 bits for its MT19937: seeds 2^32 apart agree.
TEST(TorchRandperm, OnlyTheLow32SeedBitsMatter) {
  std::vector<uint32_t> a(100), b(100);
  TorchRandperm(100, 42, false, a.data());
  TorchRandperm(100, 42 + (uint64_t{1} << 32), false, b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace ddpio::sampler
