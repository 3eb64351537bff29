#include "ddpio/sampler/permutation.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/splitmix64.h"

namespace ddpio::sampler {

namespace {
constexpr EnumName<PermutationKind> kPermutations[] = {
    {PermutationKind::kTorch, "torch"},
    {PermutationKind::kTorchLegacy, "torch-legacy"},
    {PermutationKind::kFeistel, "feistel"}};
}  // namespace

std::string PermutationKindName(PermutationKind kind) { return NameOf(kPermutations, kind); }
absl::StatusOr<PermutationKind> ParsePermutationKind(std::string_view name) {
  return ParseName(kPermutations, name, "permutation");
}

template <typename T>
void TorchRandperm(uint64_t n, uint64_t seed, bool legacy, T* out) {
  // at::mt19937 is the standard 32-bit Mersenne Twister seeded with the low 32 bits of the
  // seed, which is what std::mt19937 specifies.
  std::mt19937 engine(static_cast<uint32_t>(seed));
  if (legacy || n < kTorchLargeRandpermThreshold) {
    for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<T>(i);
    for (uint64_t i = 0; i + 1 < n; ++i) {
      uint64_t z = static_cast<uint32_t>(engine()) % (n - i);
      T save = out[i];
      out[i] = out[z + i];
      out[z + i] = save;
    }
    return;
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t hi = static_cast<uint32_t>(engine());
    uint64_t lo = static_cast<uint32_t>(engine());
    uint64_t z = ((hi << 32) | lo) % (i + 1);
    out[i] = static_cast<T>(i);
    out[i] = out[z];
    out[z] = static_cast<T>(i);
  }
}

template void TorchRandperm<uint32_t>(uint64_t, uint64_t, bool, uint32_t*);
template void TorchRandperm<uint64_t>(uint64_t, uint64_t, bool, uint64_t*);

namespace {

uint64_t Mix(uint64_t z) { return SplitMix64Mix(z); }

}  // namespace

Permutation Permutation::Make(uint64_t n, uint64_t seed, bool shuffle, PermutationKind kind) {
  Permutation p;
  p.n_ = n;
  if (!shuffle || n <= 1) {
    p.storage_ = Storage::kIdentity;
    return p;
  }
  if (kind == PermutationKind::kFeistel) {
    p.storage_ = Storage::kFeistel;
    int bits = 1;
    while (bits < 64 && (uint64_t{1} << bits) < n) ++bits;
    p.half_bits_ = (bits + 1) / 2;
    if (p.half_bits_ < 1) p.half_bits_ = 1;
    uint64_t k = Mix(seed ^ 0x6A09E667F3BCC909ull);
    for (auto& key : p.keys_) key = k = Mix(k + kSplitMix64Gamma);
    return p;
  }
  const bool legacy = kind == PermutationKind::kTorchLegacy;
  if (n <= (uint64_t{1} << 32)) {
    p.storage_ = Storage::kU32;
    p.u32_.resize(n);
    TorchRandperm(n, seed, legacy, p.u32_.data());
  } else {
    p.storage_ = Storage::kU64;
    p.u64_.resize(n);
    TorchRandperm(n, seed, legacy, p.u64_.data());
  }
  return p;
}

Permutation Permutation::FromEntries(std::vector<uint32_t> entries) {
  Permutation p;
  p.n_ = entries.size();
  p.storage_ = Storage::kU32;
  p.u32_ = std::move(entries);
  return p;
}

Permutation Permutation::FromEntries(std::vector<uint64_t> entries) {
  Permutation p;
  p.n_ = entries.size();
  p.storage_ = Storage::kU64;
  p.u64_ = std::move(entries);
  return p;
}

uint64_t Permutation::FeistelAt(uint64_t pos) const {
  // Balanced Feistel network on 2 * half_bits_ bits; values >= n walk the cycle until they land
  // in [0, n). The domain is < 4n, so that takes under 4 steps on average.
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t x = pos;
  do {
    uint64_t left = x >> half_bits_, right = x & mask;
    for (uint64_t key : keys_) {
      uint64_t next = left ^ (Mix(right ^ key) & mask);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= n_);
  return x;
}

uint64_t Permutation::At(uint64_t pos) const {
  switch (storage_) {
    case Storage::kIdentity:
      return pos;
    case Storage::kU32:
      return u32_[pos];
    case Storage::kU64:
      return u64_[pos];
    case Storage::kFeistel:
      return FeistelAt(pos);
  }
  return pos;
}

uint64_t Permutation::memory_bytes() const {
  return u32_.size() * sizeof(uint32_t) + u64_.size() * sizeof(uint64_t);
}

}  // namespace ddpio::sampler
