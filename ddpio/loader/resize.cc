#include "ddpio/loader/resize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ddpio::loader {
namespace {

// 14-bit weights: a weight (at most 1.0 = 16384) fits an int16, so two taps of 8-bit pixels go
// through one pmaddwd. PIL uses 22 bits; the difference is below 0.05 of a level per pass.
constexpr int kPrecisionBits = 14;

bool g_simd = true;  // Resampler::UseSimdForTesting

// Two 14-bit weights as the int16 pair one pmaddwd multiplies two taps by (a in the low half).
inline uint32_t PackPair(int32_t a, int32_t b) {
  return (static_cast<uint32_t>(a) & 0xffff) | (static_cast<uint32_t>(b) << 16);
}

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
                   int x_begin, int x_end, uint8_t* out) {
  for (int x = x_begin; x < x_end; ++x) {
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

// RGB with every window exactly 2 * P taps wide (shorter windows are zero-padded): one 8-byte
// load holds two taps' R, G, B; pshufb spreads them into int16 pairs (R_a, R_b, G_a, G_b, B_a,
// B_b, 0, 0) and one pmaddwd with the two weights gives the three channels' partial sums. Reads
// two bytes past the last tap, so windows need 2 * P + 1 readable pixels. The integer sums are
// exactly the generic loop's. Selected at run time (HaveSse41); otherwise the generic loop runs.
template <int P>
__attribute__((target("sse4.1"))) void HorizontalRowPairs3(const uint8_t* in, const int* start,
                                                           const uint32_t* pairs, int x_begin,
                                                           int x_end, uint8_t* out) {
  const __m128i half = _mm_set1_epi32(1 << (kPrecisionBits - 1));
  const __m128i spread = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  for (int x = x_begin; x < x_end; ++x) {
    const uint32_t* w = pairs + static_cast<size_t>(x) * P;
    const uint8_t* p = in + static_cast<size_t>(start[x]) * 3;
    __m128i acc = half;
    for (int i = 0; i < P; ++i) {
      const __m128i px =
          _mm_shuffle_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 6 * i)), spread);
      acc = _mm_add_epi32(acc, _mm_madd_epi16(px, _mm_set1_epi32(static_cast<int32_t>(w[i]))));
    }
    acc = _mm_srai_epi32(acc, kPrecisionBits);
    // Clamp to [0, 255] and pack to bytes.
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(acc, acc), _mm_setzero_si128());
    const int32_t packed = _mm_cvtsi128_si32(bytes);
    out[3 * x] = static_cast<uint8_t>(packed);
    out[3 * x + 1] = static_cast<uint8_t>(packed >> 8);
    out[3 * x + 2] = static_cast<uint8_t>(packed >> 16);
  }
}

// HorizontalRowPairs3 for two output pixels at once with AVX2: pixel x's taps in the low 128-bit
// lane, pixel x + 1's in the high one, and their weights from `wide` (per pixel pair and tap, eight
// int32: x's packed pair four times, then x + 1's), so one vpmaddwd serves both. Same sums as the
// SSE kernel; an odd last pixel goes through it.
template <int P>
__attribute__((target("avx2"))) void HorizontalRowPairs3x2(const uint8_t* in, const int* start,
                                                           const uint32_t* pairs,
                                                           const uint32_t* wide, int x_begin,
                                                           int x_end, uint8_t* out) {
  const __m256i half = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
  const __m256i spread = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                                          0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  int x = x_begin;
  for (; x + 2 <= x_end; x += 2) {
    const __m256i* w =
        reinterpret_cast<const __m256i*>(wide) + static_cast<size_t>((x - x_begin) / 2) * P;
    const uint8_t* p0 = in + static_cast<size_t>(start[x]) * 3;
    const uint8_t* p1 = in + static_cast<size_t>(start[x + 1]) * 3;
    __m256i acc = half;
    for (int i = 0; i < P; ++i) {
      const __m256i px = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0 + 6 * i))),
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1 + 6 * i)), 1);
      acc = _mm256_add_epi32(
          acc, _mm256_madd_epi16(_mm256_shuffle_epi8(px, spread), _mm256_loadu_si256(w + i)));
    }
    acc = _mm256_srai_epi32(acc, kPrecisionBits);
    // Per lane: clamp to [0, 255], pack to bytes; the lanes' low words are x's and x + 1's RGB.
    const __m256i words = _mm256_packs_epi32(acc, acc);
    const __m256i bytes = _mm256_packus_epi16(words, words);
    const uint64_t lo = static_cast<uint32_t>(_mm256_cvtsi256_si32(bytes)) & 0xffffff;
    const uint64_t hi =
        static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(bytes, 1))) & 0xffffff;
    const uint64_t both = lo | (hi << 24);
    std::memcpy(out + 3 * static_cast<size_t>(x), &both, 6);  // little-endian: x's RGB first
  }
  if (x < x_end) HorizontalRowPairs3<P>(in, start, pairs, x, x_end, out);
}

bool HaveSse41() {
  static const bool have = __builtin_cpu_supports("sse4.1");
  return have && g_simd;
}

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have && g_simd;
}

// VerticalRow with AVX2: 16 bytes at a time, two rows per pmaddwd (their bytes interleaved into
// int16 pairs), the accumulators in registers; the tail goes through the generic loop. The integer
// sums are exactly the generic loop's.
__attribute__((target("avx2"))) size_t VerticalRowAvx2(const uint8_t* base, size_t stride,
                                                       const int32_t* w, int n, size_t bytes,
                                                       uint8_t* out) {
  const __m256i half = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
  size_t i = 0;
  for (; i + 16 <= bytes; i += 16) {
    __m256i lo = half, hi = half;
    int k = 0;
    for (; k + 1 < n; k += 2) {
      const __m128i a = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(base + static_cast<size_t>(k) * stride + i));
      const __m128i b = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(base + static_cast<size_t>(k + 1) * stride + i));
      const __m256i pair = _mm256_set1_epi32(static_cast<int32_t>(PackPair(w[k], w[k + 1])));
      lo = _mm256_add_epi32(lo,
                            _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b)), pair));
      hi = _mm256_add_epi32(hi,
                            _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b)), pair));
    }
    if (k < n) {
      const __m128i a = _mm_loadu_si128(
          reinterpret_cast<const __m128i*>(base + static_cast<size_t>(k) * stride + i));
      const __m128i zero = _mm_setzero_si128();
      const __m256i pair = _mm256_set1_epi32(static_cast<int32_t>(PackPair(w[k], 0)));
      lo = _mm256_add_epi32(
          lo, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, zero)), pair));
      hi = _mm256_add_epi32(
          hi, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, zero)), pair));
    }
    lo = _mm256_srai_epi32(lo, kPrecisionBits);
    hi = _mm256_srai_epi32(hi, kPrecisionBits);
    // packs works within 128-bit lanes: [lo0-3 hi0-3 | lo4-7 hi4-7] -> reorder to [lo0-7 | hi0-7].
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
    const __m128i packed =
        _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  return i;
}

// out[i] for i in [0, bytes): vertical filter over `n` rows `stride` bytes apart.
DDPIO_MULTIVERSION
void VerticalRowGeneric(const uint8_t* base, size_t stride, const int32_t* w, int n, size_t begin,
                        size_t bytes, int32_t* acc, uint8_t* out) {
  // Whole rows at a time: the inner loops are contiguous and vectorise.
  std::fill(acc + begin, acc + bytes, 1 << (kPrecisionBits - 1));
  for (int k = 0; k < n; ++k) {
    const uint8_t* in = base + static_cast<size_t>(k) * stride;
    const int32_t wk = w[k];
    for (size_t i = begin; i < bytes; ++i) acc[i] += in[i] * wk;
  }
  for (size_t i = begin; i < bytes; ++i) out[i] = Clip8(acc[i]);
}

void VerticalRow(const uint8_t* base, size_t stride, const int32_t* w, int n, size_t bytes,
                 int32_t* acc, uint8_t* out) {
  const size_t done = HaveAvx2() ? VerticalRowAvx2(base, stride, w, n, bytes, out) : 0;
  VerticalRowGeneric(base, stride, w, n, done, bytes, acc, out);
}

// One output row of the horizontal pass: output pixels [simd_begin, simd_end) through the paired
// kernels (their windows lie inside the readable pixels: Resampler::Apply), two at a time with AVX2
// when `wide` holds their weights, the rest through the generic loop.
void HorizontalPass(const uint8_t* in, int channels, const std::vector<int>& start,
                    const std::vector<int>& count, const std::vector<int32_t>& w, int ksize,
                    const std::vector<uint32_t>& pairs, const uint32_t* wide, int simd_begin,
                    int simd_end, int dst_w, uint8_t* out) {
  if (simd_begin < simd_end) {
    const int p = (ksize + 1) / 2;
    const auto run = [&]<int P>() {
      if (wide != nullptr) {
        HorizontalRowPairs3x2<P>(in, start.data(), pairs.data(), wide, simd_begin, simd_end, out);
      } else {
        HorizontalRowPairs3<P>(in, start.data(), pairs.data(), simd_begin, simd_end, out);
      }
    };
    if (p == 2) run.operator()<2>();
    if (p == 3) run.operator()<3>();
    if (p == 4) run.operator()<4>();
    if (p == 5) run.operator()<5>();
    if (p == 6) run.operator()<6>();
  }
  HorizontalRow(in, channels, start, count, w, ksize, 0, simd_begin, out);
  HorizontalRow(in, channels, start, count, w, ksize, simd_end, dst_w, out);
}

}  // namespace

void Resampler::Resize(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                       const Box& box, uint8_t* dst, int dst_w, int dst_h, int dst_stride,
                       bool flip) {
  Compute(src_w, box.x0, box.x1, dst_w, &horizontal_);
  Compute(src_h, box.y0, box.y1, dst_h, &vertical_);
  Apply(src, src_w, src_h, src_stride, channels, dst, dst_w, dst_h, dst_stride, flip);
}

bool Resampler::ResizeWindow(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                             int origin_x, int origin_y, int full_w, int full_h, const Box& box,
                             uint8_t* dst, int dst_w, int dst_h, int dst_stride, bool flip) {
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

void Resampler::UseSimdForTesting(bool on) { g_simd = on; }

void Resampler::PrepareHorizontal(int channels, bool flip) {
  Weights& h = horizontal_;
  const int n = static_cast<int>(h.start.size()), k = h.ksize;
  if (flip) {  // output pixel x takes the weights of dst_w - 1 - x: mirrored with no extra pass
    std::reverse(h.start.begin(), h.start.end());
    std::reverse(h.count.begin(), h.count.end());
    const auto block = [&](int x) { return h.w.begin() + static_cast<std::ptrdiff_t>(x) * k; };
    for (int l = 0, r = n - 1; l < r; ++l, --r) std::swap_ranges(block(l), block(l + 1), block(r));
  }
  pairs_per_pixel_ = 0;
  if (channels != 3 || k > 11 || !HaveSse41()) return;
  const int p = (k + 1) / 2;
  pairs_.resize(static_cast<size_t>(n) * p);
  for (int x = 0; x < n; ++x) {
    const int32_t* w = &h.w[static_cast<size_t>(x) * k];
    for (int j = 0; j < p; ++j) {
      pairs_[static_cast<size_t>(x) * p + j] = PackPair(w[2 * j], 2 * j + 1 < k ? w[2 * j + 1] : 0);
    }
  }
  pairs_per_pixel_ = p;
}

std::pair<int, int> Resampler::SimdRange(int row_pixels) const {
  if (pairs_per_pixel_ == 0) return {0, 0};
  // The paired kernel reads 2 * P taps and two bytes more: 2 * P + 1 whole pixels from the start.
  const int reach = 2 * pairs_per_pixel_ + 1;
  const std::vector<int>& start = horizontal_.start;
  const int n = static_cast<int>(start.size());
  int begin = 0, end = n;
  while (begin < n && start[begin] + reach > row_pixels) ++begin;
  while (end > begin && start[end - 1] + reach > row_pixels) --end;
  for (int x = begin; x < end; ++x) {
    if (start[x] + reach > row_pixels)
      return {0, 0};  // not one run (cannot happen: starts are monotone)
  }
  return {begin, end};
}

const uint32_t* Resampler::PrepareWide(int begin, int end) {
  if (pairs_per_pixel_ == 0 || end - begin < 2 || !HaveAvx2()) return nullptr;
  const int p = pairs_per_pixel_;
  const size_t groups = static_cast<size_t>(end - begin) / 2;
  wide_.resize(groups * p * 8);
  uint32_t* w = wide_.data();
  for (size_t g = 0; g < groups; ++g) {
    const uint32_t* a = &pairs_[(begin + 2 * g) * p];
    for (int i = 0; i < p; ++i) {
      uint32_t* out = w + (g * p + i) * 8;
      std::fill(out, out + 4, a[i]);
      std::fill(out + 4, out + 8, a[p + i]);
    }
  }
  return w;
}

void Resampler::Apply(const uint8_t* src, int src_w, int src_h, int src_stride, int channels,
                      uint8_t* dst, int dst_w, int dst_h, int dst_stride, bool flip) {
  PrepareHorizontal(channels, flip);
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
    // Each intermediate row is followed by kPad zero pixels for the paired kernel's reads.
    constexpr int kPad = 8;
    const size_t mid_stride = mid_bytes + kPad * channels;
    rows_.resize(static_cast<size_t>(dst_h) * mid_stride);
    acc_.resize(mid_bytes);
    for (int y = 0; y < dst_h; ++y) {
      VerticalRow(src + static_cast<size_t>(vertical_.start[y]) * src_stride +
                      static_cast<size_t>(col0) * channels,
                  static_cast<size_t>(src_stride),
                  &vertical_.w[static_cast<size_t>(y) * vertical_.ksize], vertical_.count[y],
                  mid_bytes, acc_.data(), rows_.data() + y * mid_stride);
      std::memset(rows_.data() + y * mid_stride + mid_bytes, 0, mid_stride - mid_bytes);
    }
    // Horizontal starts are relative to col0 in the intermediate rows.
    for (int x = 0; x < dst_w; ++x) horizontal_.start[x] -= col0;
    const auto [simd_begin, simd_end] = SimdRange(ncols + kPad);
    const uint32_t* wide = PrepareWide(simd_begin, simd_end);
    for (int y = 0; y < dst_h; ++y) {
      HorizontalPass(rows_.data() + y * mid_stride, channels, horizontal_.start, horizontal_.count,
                     horizontal_.w, horizontal_.ksize, pairs_, wide, simd_begin, simd_end, dst_w,
                     dst + static_cast<size_t>(y) * dst_stride);
    }
  } else {
    const size_t row_bytes = static_cast<size_t>(dst_w) * channels;
    rows_.resize(static_cast<size_t>(nrows) * row_bytes);
    acc_.resize(row_bytes);
    const auto [simd_begin, simd_end] = SimdRange(src_w);
    const uint32_t* wide = PrepareWide(simd_begin, simd_end);
    for (int r = 0; r < nrows; ++r) {
      HorizontalPass(src + static_cast<size_t>(row0 + r) * src_stride, channels, horizontal_.start,
                     horizontal_.count, horizontal_.w, horizontal_.ksize, pairs_, wide, simd_begin,
                     simd_end, dst_w, rows_.data() + static_cast<size_t>(r) * row_bytes);
    }
    for (int y = 0; y < dst_h; ++y) {
      VerticalRow(rows_.data() + static_cast<size_t>(vertical_.start[y] - row0) * row_bytes,
                  row_bytes, &vertical_.w[static_cast<size_t>(y) * vertical_.ksize],
                  vertical_.count[y], row_bytes, acc_.data(),
                  dst + static_cast<size_t>(y) * dst_stride);
    }
  }
}

}  // namespace ddpio::loader
