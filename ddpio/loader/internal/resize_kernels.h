// The row kernels behind Resampler (loader/resize.h): sums of 8-bit pixels times 14-bit fixed-point
// weights, rounded, shifted and clamped to [0, 255]. Each has a generic loop and SIMD versions that
// compute exactly the same integer sums, so every path gives the same bytes (resize_test compares
// them). The SIMD versions are chosen at run time from what the CPU has (SimdLevel).
#ifndef DDPIO_LOADER_INTERNAL_RESIZE_KERNELS_H_
#define DDPIO_LOADER_INTERNAL_RESIZE_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddpio::loader::internal {

// 14-bit weights: a weight (at most 1.0 = 16384) fits an int16, so two taps of 8-bit pixels go
// through one pmaddwd. PIL uses 22 bits; the difference is below 0.05 of a level per pass.
constexpr int kPrecisionBits = 14;

// The widest instructions the kernels may use, in order: SSE4.1; AVX2; AVX-512 with BW, VL and
// VBMI (vpermb), which CPUs from Intel Ice Lake and AMD Zen 4 on have.
enum class SimdLevel { kNone, kSse41, kAvx2, kAvx512 };

// What the CPU has, lowered to the limit a test set with LimitSimd (by default kAvx512: no limit).
SimdLevel Simd();
void LimitSimd(SimdLevel level);

// Two 14-bit weights as the int16 pair one pmaddwd multiplies two taps by (a in the low half).
inline uint32_t PackPair(int32_t a, int32_t b) {
  return (static_cast<uint32_t>(a) & 0xffff) | (static_cast<uint32_t>(b) << 16);
}

// out[x] for x in [x_begin, x_end): the horizontal filter over one row of `channels`-interleaved
// pixels; output pixel x takes count[x] taps from pixel start[x] with weights[x * ksize ...].
void HorizontalRow(const uint8_t* in, int channels, const std::vector<int>& start,
                   const std::vector<int>& count, const std::vector<int32_t>& weights, int ksize,
                   int x_begin, int x_end, uint8_t* out);

// HorizontalRow for RGB over [begin, end) with every window 2 * P taps wide (shorter ones padded
// with zero weights; `pairs` holds P packed pairs per output pixel). Reads 2 * P + 1 pixels from
// each window's start, so those must be readable. `wide` (or nullptr): the same pairs laid out per
// pixel pair for the AVX2 kernel, eight int32 per pair and tap pair (PrepareWide in resize.cc).
// P from 2 to 6.
void HorizontalPairs(int p, const uint8_t* in, const int* start, const uint32_t* pairs,
                     const uint32_t* wide, int begin, int end, uint8_t* out);

// Up to five consecutive output pixels of an RGB row whose windows all lie in 64 bytes from pixel
// `base`, for the AVX-512 kernel: one masked 64-byte load (load_mask: the bytes that are readable)
// holds every tap of the five.
struct PixelGroup {
  int x0 = 0;     // first output pixel
  int count = 0;  // output pixels, 1 to 5
  int base = 0;   // first source pixel loaded
  uint64_t load_mask = 0;
};
// A group's record: the PixelGroup (copied in bytes), padded to 64 bytes, then per tap pair 64
// vpermb indexes and 16 int32 weight pairs. Lane 3 * k + c is pixel x0 + k, channel c; index bytes
// 4 * lane and 4 * lane + 2 are the offsets (from base) of the pair's two taps, the other index
// bytes are unused; the weights are the pair as PackPair packs it.
constexpr size_t kGroupHeaderBytes = 64;
constexpr size_t kGroupPairBytes = 128;
static_assert(sizeof(PixelGroup) <= kGroupHeaderBytes);
constexpr size_t GroupRecordBytes(int p) { return kGroupHeaderBytes + p * kGroupPairBytes; }
// The `n` group records of an RGB row through the AVX-512 kernel (Simd() must be kAvx512), P from
// 2 to 4.
void HorizontalGroups(int p, const uint8_t* in, const uint8_t* records, size_t n, uint8_t* out);

// out[i] for i in [0, bytes): the vertical filter over `n` rows `stride` bytes apart, weights w.
// `acc`: room for `bytes` int32 (the generic loop's accumulators).
void VerticalRow(const uint8_t* base, size_t stride, const int32_t* w, int n, size_t bytes,
                 int32_t* acc, uint8_t* out);

}  // namespace ddpio::loader::internal

#endif  // DDPIO_LOADER_INTERNAL_RESIZE_KERNELS_H_
