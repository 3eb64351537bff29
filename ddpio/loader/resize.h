// Antialiased bilinear resampling of 8-bit interleaved images, as PIL's Image.resize(...,
// BILINEAR, box=...) does it (and so torchvision on PIL images): a triangle filter whose support
// widens with the downscale factor, separable (horizontal pass, then vertical), 14-bit fixed-
// point weights (PIL uses 22; with 14 two taps share one pmaddwd, and the sums stay within 0.05
// of a level of PIL's), results rounded and clamped to [0, 255]. The source region is a box with
// sub-pixel edges, so crop and resize are one operation.
//
// Chosen over stb_image_resize (libstb-dev) by a benchmark: docs/PERFORMANCE.md, "Resize".
// A Resampler keeps its weight tables and intermediate rows between calls (no allocation once
// warm); not thread-safe: one per worker thread. Its row kernels (internal/resize_kernels.h) use
// the widest SIMD the CPU has, up to AVX-512 with VBMI, and give the same bytes on every path.
#ifndef DDPIO_LOADER_RESIZE_H_
#define DDPIO_LOADER_RESIZE_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ddpio::loader {

// A region of the source image in pixel units (x0 <= x1, y0 <= y1, within the image).
struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

class Resampler {
 public:
  // Resamples `box` of the src image (src_w x src_h, `channels` interleaved, rows `src_stride`
  // bytes apart) into dst (dst_w x dst_h, rows `dst_stride` bytes apart). With `flip`, the output
  // is mirrored left-right.
  void Resize(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
              const Box& box, uint8_t* dst, int dst_w, int dst_h, int dst_stride,
              bool flip = false);

  // Resize for a window of a larger image: `src` holds src_w x src_h pixels of a full_w x full_h
  // image starting at (origin_x, origin_y), and `box` is in the full image's coordinates. The
  // weights are the full image's, so the output is bit-identical to Resize over the whole image —
  // provided every filter window lies inside the window; false (nothing written) when one does not.
  bool ResizeWindow(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                    int origin_x, int origin_y, int full_w, int full_h, const Box& box,
                    uint8_t* dst, int dst_w, int dst_h, int dst_stride, bool flip = false);

  // Tests: the widest instructions the kernels may use from now on, in every thread (kAvx512, the
  // default, is "whatever the CPU has"); every level must give the same bytes.
  enum class Simd { kNone, kSse41, kAvx2, kAvx512 };
  static void LimitSimdForTesting(Simd level);
  // The level the kernels use now: the CPU's, lowered by LimitSimdForTesting.
  static Simd SimdForTesting();

 private:
  // Mirrors the horizontal weights for `flip` and packs them in pairs for the SIMD kernel.
  void PrepareHorizontal(int channels, bool flip);
  // The output pixels whose SIMD reads stay within `row_pixels` readable pixels: [first, second).
  std::pair<int, int> SimdRange(int row_pixels) const;
  // The weights of output pixels [begin, end) two by two for the AVX2 kernel (in wide_);
  // nullptr when that kernel does not run.
  const uint32_t* PrepareWide(int begin, int end);
  // The AVX-512 kernel's groups of five output pixels (group_records_, group_count_) for rows of
  // `row_pixels` readable pixels. False, with group_count_ 0, when that kernel does not run: no
  // AVX-512 VBMI, windows of more than 8 taps, or five windows spanning more than 64 bytes.
  bool PrepareGroups(int row_pixels);
  // Chooses the horizontal kernels for rows of `row_pixels` readable pixels: the AVX-512 groups,
  // else the paired kernels over SimdRange (with wide_rows_ for AVX2) and the generic loop.
  void PrepareRows(int row_pixels);
  // One row of the horizontal pass with the kernels PrepareRows chose.
  void HorizontalPassRow(const uint8_t* in, int channels, uint8_t* out) const;
  // The two passes with the weights in horizontal_ and vertical_ (starts relative to `src`).
  void Apply(const uint8_t* src, int src_w, int src_h, int src_stride, int channels, uint8_t* dst,
             int dst_w, int dst_h, int dst_stride, bool flip);
  struct Weights {
    std::vector<int> start;  // first source pixel of each output pixel
    std::vector<int> count;  // number of source pixels
    std::vector<int32_t> w;  // fixed-point weights, `ksize` per output pixel
    int ksize = 0;
  };
  static void Compute(int in_size, double in0, double in1, int out_size, Weights* out);

  Weights horizontal_, vertical_;
  std::vector<uint8_t> rows_;  // horizontally resampled rows
  std::vector<int32_t> acc_;   // one output row of accumulators
  std::vector<uint32_t>
      pairs_;  // horizontal weights two by two (int16 pairs), pairs_per_pixel_ each
  std::vector<uint32_t> wide_;  // pairs_ per pixel pair for the AVX2 kernel: PrepareWide
  int pairs_per_pixel_ = 0;
  std::vector<uint8_t> group_records_;  // PrepareGroups: internal/resize_kernels.h's layout
  size_t group_count_ = 0;
  int simd_begin_ = 0, simd_end_ = 0;    // PrepareRows: the paired kernels' output pixels
  const uint32_t* wide_rows_ = nullptr;  // PrepareRows: wide_, or nullptr
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_RESIZE_H_
