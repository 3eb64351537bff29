#include "ddpio/loader/resize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ddpio::loader {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

inline uint8_t Clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace

void Resampler::Compute(int in_size, double in0, double in1, int out_size, Weights* out) {
  const double scale = (in1 - in0) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;  // bilinear (triangle) support is 1
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  out->ksize = ksize;
  out->start.resize(out_size);
  out->count.resize(out_size);
  out->w.assign(static_cast<size_t>(out_size) * ksize, 0);
  std::vector<double> k(ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    // Truncation toward zero, as PIL's (int) casts.
    int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    xmax = std::clamp(xmax, 0, ksize);
    double total = 0;
    for (int x = 0; x < xmax; ++x) {
      double d = std::fabs((x + xmin - center + 0.5) * ss);
      k[x] = d < 1.0 ? 1.0 - d : 0.0;
      total += k[x];
    }
    if (total == 0) {  // degenerate box: take the nearest pixel
      xmin = std::clamp(static_cast<int>(center), 0, in_size - 1);
      xmax = 1;
      k[0] = 1.0;
      total = 1.0;
    }
    out->start[xx] = xmin;
    out->count[xx] = xmax;
    for (int x = 0; x < xmax; ++x) {
      double v = k[x] / total * (1 << kPrecisionBits);
      out->w[static_cast<size_t>(xx) * ksize + x] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
    }
  }
}

// Hot loops are multiversioned (AVX2 where the CPU has it, chosen at load time through an
// ifunc). Not under sanitizers: ifunc resolvers run before the TSan/ASan runtime is ready and
// crash the program at start.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DDPIO_MULTIVERSION
#else
#define DDPIO_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#endif

namespace {

// out[x] for x in [0, dst_w): horizontal filter over one row of `channels`-interleaved pixels.
DDPIO_MULTIVERSION
void HorizontalRow(const uint8_t* in, int channels, const std::vector<int>& start,
                   const std::vector<int>& count, const std::vector<int32_t>& weights, int ksize,
                   int x_begin, int dst_w, uint8_t* out) {
  for (int x = x_begin; x < dst_w; ++x) {
    const int32_t* w = &weights[static_cast<size_t>(x) * ksize];
    const uint8_t* p = in + static_cast<size_t>(start[x]) * channels;
    const int n = count[x];
    if (channels == 3) {
      int32_t a = 1 << (kPrecisionBits - 1), b = a, c = a;
      for (int i = 0; i < n; ++i) {
        a += p[3 * i] * w[i];
        b += p[3 * i + 1] * w[i];
        c += p[3 * i + 2] * w[i];
      }
      out[3 * x] = Clip8(a);
      out[3 * x + 1] = Clip8(b);
      out[3 * x + 2] = Clip8(c);
    } else {
      for (int ch = 0; ch < channels; ++ch) {
        int32_t a = 1 << (kPrecisionBits - 1);
        for (int i = 0; i < n; ++i) a += p[channels * i + ch] * w[i];
        out[channels * x + ch] = Clip8(a);
      }
    }
  }
}

// RGB with every window exactly K taps wide (shorter windows are zero-padded by Compute): one
// pmovzxbd loads a tap's R, G, B (and the next byte, ignored) as four int32 lanes, one pmulld +
// paddd per tap, no per-pixel branches. Reads one byte past the last tap, so windows need K + 1
// readable pixels. Selected at run time (HaveSse41); without SSE4.1 the generic loop runs.
template <int K>
__attribute__((target("sse4.1"))) void HorizontalRowFixed3Sse41(const uint8_t* in, const int* start,
                                                                 const int32_t* weights, int x_end,
                                                                 uint8_t* out) {
  const __m128i half = _mm_set1_epi32(1 << (kPrecisionBits - 1));
  for (int x = 0; x < x_end; ++x) {
    const int32_t* w = weights + static_cast<size_t>(x) * K;
    const uint8_t* p = in + static_cast<size_t>(start[x]) * 3;
    __m128i acc = half;
    for (int i = 0; i < K; ++i) {
      int32_t four;
      std::memcpy(&four, p + 3 * i, 4);
      __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(four));
      acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(w[i])));
    }
    acc = _mm_srai_epi32(acc, kPrecisionBits);
    // Clamp to [0, 255] and pack to bytes.
    __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(acc, acc), _mm_setzero_si128());
    const int32_t packed = _mm_cvtsi128_si32(bytes);
    out[3 * x] = static_cast<uint8_t>(packed);
    out[3 * x + 1] = static_cast<uint8_t>(packed >> 8);
    out[3 * x + 2] = static_cast<uint8_t>(packed >> 16);
  }
}

bool HaveSse41() {
  static const bool have = __builtin_cpu_supports("sse4.1");
  return have;
}

// out[i] for i in [0, bytes): vertical filter over `n` rows `stride` bytes apart.
DDPIO_MULTIVERSION
void VerticalRow(const uint8_t* base, size_t stride, const int32_t* w, int n, size_t bytes,
                 int32_t* acc, uint8_t* out) {
  // Whole rows at a time: the inner loops are contiguous and vectorise.
  std::fill(acc, acc + bytes, 1 << (kPrecisionBits - 1));
  for (int k = 0; k < n; ++k) {
    const uint8_t* in = base + static_cast<size_t>(k) * stride;
    const int32_t wk = w[k];
    for (size_t i = 0; i < bytes; ++i) acc[i] += in[i] * wk;
  }
  for (size_t i = 0; i < bytes; ++i) out[i] = Clip8(acc[i]);
}

// One output row of the horizontal pass. Output pixels whose K-tap window lies inside the
// `row_pixels` readable pixels take the fixed-width kernel; the rest the generic loop.
void HorizontalPass(const uint8_t* in, int row_pixels, int channels, const std::vector<int>& start,
                    const std::vector<int>& count, const std::vector<int32_t>& w, int ksize,
                    int dst_w, uint8_t* out) {
  int x_safe = 0;
  if (channels == 3 && (ksize == 3 || ksize == 5 || ksize == 7) && HaveSse41()) {
    // K taps plus the one byte the SIMD load reads beyond them (a whole pixel, to keep it simple).
    while (x_safe < dst_w && start[x_safe] + ksize + 1 <= row_pixels) ++x_safe;  // starts ascend
    if (ksize == 3) HorizontalRowFixed3Sse41<3>(in, start.data(), w.data(), x_safe, out);
    if (ksize == 5) HorizontalRowFixed3Sse41<5>(in, start.data(), w.data(), x_safe, out);
    if (ksize == 7) HorizontalRowFixed3Sse41<7>(in, start.data(), w.data(), x_safe, out);
  }
  HorizontalRow(in, channels, start, count, w, ksize, x_safe, dst_w, out);
}

}  // namespace

void Resampler::Resize(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                       const Box& box, uint8_t* dst, int dst_w, int dst_h, int dst_stride,
                       bool flip) {
  Compute(src_w, box.x0, box.x1, dst_w, &horizontal_);
  Compute(src_h, box.y0, box.y1, dst_h, &vertical_);
  Apply(src, src_w, src_h, src_stride, channels, dst, dst_w, dst_h, dst_stride, flip);
}

bool Resampler::ResizeWindow(const uint8_t* src, int src_w, int src_h, int src_stride, int channels, int origin_x,
                             int origin_y, int full_w, int full_h, const Box& box, uint8_t* dst, int dst_w, int dst_h,
                             int dst_stride, bool flip) {
  Compute(full_w, box.x0, box.x1, dst_w, &horizontal_);
  Compute(full_h, box.y0, box.y1, dst_h, &vertical_);
  const auto shift = [](Weights& w, int origin, int size) {
    for (size_t i = 0; i < w.start.size(); ++i) {
      w.start[i] -= origin;
      if (w.start[i] < 0 || w.start[i] + w.count[i] > size) return false;
    }
    return true;
  };
  if (!shift(horizontal_, origin_x, src_w) || !shift(vertical_, origin_y, src_h)) return false;
  Apply(src, src_w, src_h, src_stride, channels, dst, dst_w, dst_h, dst_stride, flip);
  return true;
}

void Resampler::Apply(const uint8_t* src, int src_w, int src_h, int src_stride, int channels, uint8_t* dst,
                      int dst_w, int dst_h, int dst_stride, bool flip) {
  int row0 = src_h, row1 = 0, col0 = src_w, col1 = 0;
  for (int y = 0; y < dst_h; ++y) {
    row0 = std::min(row0, vertical_.start[y]);
    row1 = std::max(row1, vertical_.start[y] + vertical_.count[y]);
  }
  for (int x = 0; x < dst_w; ++x) {
    col0 = std::min(col0, horizontal_.start[x]);
    col1 = std::max(col1, horizontal_.start[x] + horizontal_.count[x]);
  }
  const int nrows = std::max(row1 - row0, 0), ncols = std::max(col1 - col0, 0);
  // Two passes; the gathering horizontal pass is the costly one, so run it on whichever side
  // has fewer rows: after the vertical pass when shrinking vertically (dst_h < nrows).
  if (dst_h < nrows) {
    const size_t mid_bytes = static_cast<size_t>(ncols) * channels;
    // Each intermediate row is followed by kPad zero pixels for the fixed-width kernels.
    constexpr int kPad = 8;
    const size_t mid_stride = mid_bytes + kPad * channels;
    rows_.assign(static_cast<size_t>(dst_h) * mid_stride, 0);
    acc_.resize(mid_bytes);
    for (int y = 0; y < dst_h; ++y) {
      VerticalRow(src + static_cast<size_t>(vertical_.start[y]) * src_stride +
                      static_cast<size_t>(col0) * channels,
                  static_cast<size_t>(src_stride), &vertical_.w[static_cast<size_t>(y) * vertical_.ksize],
                  vertical_.count[y], mid_bytes, acc_.data(), rows_.data() + y * mid_stride);
    }
    // Horizontal starts are relative to col0 in the intermediate rows.
    for (int x = 0; x < dst_w; ++x) horizontal_.start[x] -= col0;
    for (int y = 0; y < dst_h; ++y) {
      HorizontalPass(rows_.data() + y * mid_stride, ncols + kPad, channels, horizontal_.start,
                     horizontal_.count, horizontal_.w, horizontal_.ksize, dst_w,
                     dst + static_cast<size_t>(y) * dst_stride);
    }
  } else {
    const size_t row_bytes = static_cast<size_t>(dst_w) * channels;
    rows_.resize(static_cast<size_t>(nrows) * row_bytes);
    acc_.resize(row_bytes);
    for (int r = 0; r < nrows; ++r) {
      HorizontalPass(src + static_cast<size_t>(row0 + r) * src_stride, src_w, channels,
                     horizontal_.start, horizontal_.count, horizontal_.w, horizontal_.ksize, dst_w,
                     rows_.data() + static_cast<size_t>(r) * row_bytes);
    }
    for (int y = 0; y < dst_h; ++y) {
      VerticalRow(rows_.data() + static_cast<size_t>(vertical_.start[y] - row0) * row_bytes, row_bytes,
                  &vertical_.w[static_cast<size_t>(y) * vertical_.ksize], vertical_.count[y],
                  row_bytes, acc_.data(), dst + static_cast<size_t>(y) * dst_stride);
    }
  }
  if (flip) {
    for (int y = 0; y < dst_h; ++y) {
      uint8_t* out = dst + static_cast<size_t>(y) * dst_stride;
      for (int l = 0, r = dst_w - 1; l < r; ++l, --r) {
        for (int ch = 0; ch < channels; ++ch) std::swap(out[l * channels + ch], out[r * channels + ch]);
      }
    }
  }
}

}  // namespace ddpio::loader
