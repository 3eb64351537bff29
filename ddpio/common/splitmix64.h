// SplitMix64 (Steele, Lea, Flood 2014; the seeding generator of xoshiro): a tiny, fully
// specified generator, so sampled augmentations, synthetic images and permutation keys are the
// same on every platform and standard library (std:: distributions are implementation-defined).
#ifndef DDPIO_COMMON_SPLITMIX64_H_
#define DDPIO_COMMON_SPLITMIX64_H_

#include <cstdint>

namespace ddpio {

inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// SplitMix64's output function: a strong 64-bit mixer (a bijection).
inline uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return SplitMix64Mix(state_ += kSplitMix64Gamma); }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

 private:
  uint64_t state_;
};

}  // namespace ddpio

#endif  // DDPIO_COMMON_SPLITMIX64_H_
