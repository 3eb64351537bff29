// The order of one epoch: a permutation of [0, n) chosen by (seed + epoch).
//
// Three sources, chosen explicitly:
//   kTorch       PyTorch's CPU torch.randperm with a torch.Generator seeded with seed + epoch,
//                index for index: MT19937 seeded with the low 32 bits, forward Fisher-Yates with
//                random() % (n - i) for n < 2^32 / 20, and for larger n the "inside-out" variant
//                with random64() that current PyTorch uses. The default.
//   kTorchLegacy the same but forward Fisher-Yates with random() % (n - i) for every n, as
//                PyTorch did before large sizes got their own algorithm.
//   kFeistel     a keyed Feistel-network bijection with cycle walking: O(1) memory, any entry
//                computed on its own. Not PyTorch's order; for datasets too large to hold one
//                permutation per epoch.
// With shuffle off, the identity. Materialised permutations use 4 bytes per entry when n fits
// in 32 bits. Immutable after construction: thread-safe to share.
#ifndef DDPIO_SAMPLER_PERMUTATION_H_
#define DDPIO_SAMPLER_PERMUTATION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::sampler {

enum class PermutationKind { kTorch, kTorchLegacy, kFeistel };

// "torch", "torch-legacy", "feistel".
std::string PermutationKindName(PermutationKind kind);
absl::StatusOr<PermutationKind> ParsePermutationKind(std::string_view name);

// The size from which current PyTorch switches randperm to the inside-out 64-bit variant.
inline constexpr uint64_t kTorchLargeRandpermThreshold = 0xFFFFFFFFull / 20;

// Fills out[0, n) exactly as torch.randperm(n, generator=torch.Generator().manual_seed(seed))
// on the CPU (kTorch, or kTorchLegacy when `legacy`). T is uint32_t (n <= 2^32) or uint64_t.
template <typename T>
void TorchRandperm(uint64_t n, uint64_t seed, bool legacy, T* out);

class Permutation {
 public:
  // A permutation of [0, n) for one epoch. `seed` is seed + epoch for the torch kinds (as
  // DistributedSampler seeds its generator); the Feistel key is derived from it too.
  static Permutation Make(uint64_t n, uint64_t seed, bool shuffle, PermutationKind kind);
  // The permutation whose entry p is entries[p] (the caller made it one; block_order.h).
  static Permutation FromEntries(std::vector<uint32_t> entries);
  static Permutation FromEntries(std::vector<uint64_t> entries);

  uint64_t size() const { return n_; }
  // The entry at position `pos` < size().
  uint64_t At(uint64_t pos) const;
  // Bytes held (0 for identity and Feistel).
  uint64_t memory_bytes() const;

 private:
  enum class Storage { kIdentity, kU32, kU64, kFeistel };
  uint64_t FeistelAt(uint64_t pos) const;

  uint64_t n_ = 0;
  Storage storage_ = Storage::kIdentity;
  std::vector<uint32_t> u32_;
  std::vector<uint64_t> u64_;
  // Feistel: 2 * half_bits_ >= bits of n; 6 round keys.
  int half_bits_ = 0;
  uint64_t keys_[6] = {};
};

}  // namespace ddpio::sampler

#endif  // DDPIO_SAMPLER_PERMUTATION_H_
