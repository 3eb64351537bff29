// Antialiased bilinear resampling of 8-bit interleaved images, as PIL's Image.resize(...,
// BILINEAR, box=...) does it (and so torchvision on PIL images): a triangle filter whose support
// widens with the downscale factor, separable (horizontal pass, then vertical), 14-bit fixed-
// point weights (PIL uses 22; with 14 two taps share one pmaddwd, and the sums stay within 0.05
// of a level of PIL's), results rounded and clamped to [0, 255]. The source region is a box with
// sub-pixel edges, so crop and resize are one operation.
//
// Chosen over stb_image_resize (libstb-dev) by a benchmark: docs/PERFORMANCE.md, "Resize".
// A Resampler keeps its weight tables and intermediate rows between calls (no allocation once
// warm); not thread-safe: one per worker thread.
#ifndef DDPIO_LOADER_RESIZE_H_
#define DDPIO_LOADER_RESIZE_H_

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

  // Tests: false runs the generic loops only (the SIMD kernels must give the same bytes).
  static void UseSimdForTesting(bool on);

 private:
  // Mirrors the horizontal weights for `flip` and packs them in pairs for the SIMD kernel.
  void PrepareHorizontal(int channels, bool flip);
  // The output pixels whose SIMD reads stay within `row_pixels` readable pixels: [first, second).
  std::pair<int, int> SimdRange(int row_pixels) const;
  // The weights of output pixels [begin, end) two by two for the AVX2 kernel (in wide_);
  // nullptr when that kernel does not run.
  const uint32_t* PrepareWide(int begin, int end);
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
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_RESIZE_H_
