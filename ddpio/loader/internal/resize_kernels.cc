#include "ddpio/loader/internal/resize_kernels.h"

// GCC 12's AVX-512 headers make their "undefined" vectors from themselves (`__m512i __Y = __Y;`)
// and warn that they may be used uninitialized where they are inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ddpio::loader::internal {
namespace {

std::atomic<SimdLevel> g_limit{SimdLevel::kAvx512};  // LimitSimd

SimdLevel CpuLevel() {
  static const SimdLevel level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vbmi")) {
      return SimdLevel::kAvx512;
    }
    if (__builtin_cpu_supports("avx2")) return SimdLevel::kAvx2;
    if (__builtin_cpu_supports("sse4.1")) return SimdLevel::kSse41;
    return SimdLevel::kNone;
  }();
  return level;
}

inline uint8_t Clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace

SimdLevel Simd() { return std::min(CpuLevel(), g_limit.load(std::memory_order_relaxed)); }
void LimitSimd(SimdLevel level) { g_limit.store(level, std::memory_order_relaxed); }

// Hot loops are multiversioned (AVX2 where the CPU has it, chosen at load time through an
// ifunc). Not under sanitizers: ifunc resolvers run before the TSan/ASan runtime is ready and
// crash the program at start.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DDPIO_MULTIVERSION
#else
#define DDPIO_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#endif

namespace {

// RGB with every window exactly 2 * P taps wide (shorter windows are zero-padded): one 8-byte
// load holds two taps' R, G, B; pshufb spreads them into int16 pairs (R_a, R_b, G_a, G_b, B_a,
// B_b, 0, 0) and one pmaddwd with the two weights gives the three channels' partial sums. Reads
// two bytes past the last tap, so windows need 2 * P + 1 readable pixels. The integer sums are
// exactly the generic loop's.
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

// Up to five output pixels at once with AVX-512 VBMI (PixelGroup and its record): per tap pair, one
// vpermb (zeroing the odd bytes) spreads the two taps' R, G, B of all five pixels into int16 pairs,
// fifteen int32 lanes, and one vpmaddwd weighs them. Same sums as the kernels above.
template <int P>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void HorizontalGroupsAvx512(
    const uint8_t* in, const uint8_t* records, size_t n, uint8_t* out) {
  const __m512i half = _mm512_set1_epi32(1 << (kPrecisionBits - 1));
  const __m512i zero = _mm512_setzero_si512();
  constexpr __mmask64 kLowBytes = 0x5555555555555555ull;  // the low byte of every int16
  for (size_t g = 0; g < n; ++g) {
    const uint8_t* record = records + g * GroupRecordBytes(P);
    PixelGroup group;
    std::memcpy(&group, record, sizeof(group));
    const __m512i px =
        _mm512_maskz_loadu_epi8(group.load_mask, in + static_cast<size_t>(group.base) * 3);
    const uint8_t* pair = record + kGroupHeaderBytes;
    __m512i acc = half;
    for (int i = 0; i < P; ++i, pair += kGroupPairBytes) {
      const __m512i index = _mm512_loadu_si512(pair);
      const __m512i weights = _mm512_loadu_si512(pair + 64);
      acc = _mm512_add_epi32(
          acc, _mm512_madd_epi16(_mm512_maskz_permutexvar_epi8(kLowBytes, index, px), weights));
    }
    acc = _mm512_max_epi32(_mm512_srai_epi32(acc, kPrecisionBits), zero);
    _mm_mask_storeu_epi8(out + 3 * static_cast<size_t>(group.x0),
                         static_cast<__mmask16>((1u << (3 * group.count)) - 1),
                         _mm512_cvtusepi32_epi8(acc));
  }
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

__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i Widen32(const uint8_t* p) {
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// VerticalRowAvx2 with AVX-512: 32 bytes at a time (widened to 32 int16), two rows per vpmaddwd.
__attribute__((target("avx512f,avx512bw,avx512vl"))) size_t VerticalRowAvx512(
    const uint8_t* base, size_t stride, const int32_t* w, int n, size_t bytes, uint8_t* out) {
  const __m512i half = _mm512_set1_epi32(1 << (kPrecisionBits - 1));
  const __m512i zero = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    __m512i lo = half, hi = half;
    int k = 0;
    for (; k + 1 < n; k += 2) {
      const __m512i a = Widen32(base + static_cast<size_t>(k) * stride + i);
      const __m512i b = Widen32(base + static_cast<size_t>(k + 1) * stride + i);
      const __m512i pair = _mm512_set1_epi32(static_cast<int32_t>(PackPair(w[k], w[k + 1])));
      lo = _mm512_add_epi32(lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(a, b), pair));
      hi = _mm512_add_epi32(hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(a, b), pair));
    }
    if (k < n) {
      const __m512i a = Widen32(base + static_cast<size_t>(k) * stride + i);
      const __m512i pair = _mm512_set1_epi32(static_cast<int32_t>(PackPair(w[k], 0)));
      lo = _mm512_add_epi32(lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(a, zero), pair));
      hi = _mm512_add_epi32(hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(a, zero), pair));
    }
    // Within each 128-bit lane, unpacklo/unpackhi and then packus give its eight words in order.
    const __m512i words = _mm512_packus_epi32(_mm512_srai_epi32(lo, kPrecisionBits),
                                              _mm512_srai_epi32(hi, kPrecisionBits));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtusepi16_epi8(words));
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

}  // namespace

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

void HorizontalPairs(int p, const uint8_t* in, const int* start, const uint32_t* pairs,
                     const uint32_t* wide, int begin, int end, uint8_t* out) {
  const auto run = [&]<int P>() {
    if (wide != nullptr) {
      HorizontalRowPairs3x2<P>(in, start, pairs, wide, begin, end, out);
    } else {
      HorizontalRowPairs3<P>(in, start, pairs, begin, end, out);
    }
  };
  if (p == 2) run.operator()<2>();
  if (p == 3) run.operator()<3>();
  if (p == 4) run.operator()<4>();
  if (p == 5) run.operator()<5>();
  if (p == 6) run.operator()<6>();
}

void HorizontalGroups(int p, const uint8_t* in, const uint8_t* records, size_t n, uint8_t* out) {
  if (p == 2) HorizontalGroupsAvx512<2>(in, records, n, out);
  if (p == 3) HorizontalGroupsAvx512<3>(in, records, n, out);
  if (p == 4) HorizontalGroupsAvx512<4>(in, records, n, out);
}

void VerticalRow(const uint8_t* base, size_t stride, const int32_t* w, int n, size_t bytes,
                 int32_t* acc, uint8_t* out) {
  const SimdLevel level = Simd();
  size_t done = 0;
  if (level >= SimdLevel::kAvx512) done = VerticalRowAvx512(base, stride, w, n, bytes, out);
  if (level >= SimdLevel::kAvx2) {
    done += VerticalRowAvx2(base + done, stride, w, n, bytes - done, out + done);
  }
  VerticalRowGeneric(base, stride, w, n, done, bytes, acc, out);
}

}  // namespace ddpio::loader::internal
