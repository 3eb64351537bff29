// FNV-1a, 64 bits (offset basis 14695981039346656037, prime 1099511628211): a small,
// well-specified, non-cryptographic digest for checksums of checkpoints and parameters and for
// agreeing on settings. Test vector: Fnv1a64("a") == 0xaf63dc4c8601ec8c.
#ifndef DDPIO_COMMON_HASH_H_
#define DDPIO_COMMON_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ddpio {

inline constexpr uint64_t kFnv1a64Basis = 14695981039346656037ull;
inline constexpr uint64_t kFnv1a64Prime = 1099511628211ull;

// Continues the digest `h` over `bytes` (start with kFnv1a64Basis).
inline uint64_t Fnv1a64Bytes(const void* bytes, size_t n, uint64_t h = kFnv1a64Basis) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnv1a64Prime;
  return h;
}
inline uint64_t Fnv1a64(std::string_view s, uint64_t h = kFnv1a64Basis) {
  return Fnv1a64Bytes(s.data(), s.size(), h);
}

}  // namespace ddpio

#endif  // DDPIO_COMMON_HASH_H_
