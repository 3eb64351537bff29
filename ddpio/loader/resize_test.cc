#include "ddpio/loader/resize.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ddpio::loader {
namespace {

std::vector<uint8_t> Pattern(int w, int h, int c) {
  std::vector<uint8_t> v(static_cast<size_t>(w) * h * c);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<uint8_t>((i * 7919 + (i / 97) * 31) >> 2);
  return v;
}

// Straightforward double-precision reference of PIL's antialiased bilinear resample.
double RefPixel(const std::vector<uint8_t>& src, int w, int h, int c, const Box& b, int dw, int dh,
                int ox, int oy, int ch) {
  auto weights = [](int in_size, double in0, double in1, int out_size, int o,
                    std::vector<double>* k, int* xmin) {
    double scale = (in1 - in0) / out_size, fs = std::max(scale, 1.0), support = fs;
    double center = in0 + (o + 0.5) * scale;
    *xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    int xmax = std::min(static_cast<int>(center + support + 0.5), in_size);
    k->clear();
    double total = 0;
    for (int x = *xmin; x < xmax; ++x) {
      double d = std::fabs((x - center + 0.5) / fs);
      k->push_back(d < 1 ? 1 - d : 0);
      total += k->back();
    }
    for (double& v : *k) v /= total;
  };
  std::vector<double> kx, ky;
  int x0, y0;
  weights(w, b.x0, b.x1, dw, ox, &kx, &x0);
  weights(h, b.y0, b.y1, dh, oy, &ky, &y0);
  double acc = 0;
  for (size_t j = 0; j < ky.size(); ++j) {
    for (size_t i = 0; i < kx.size(); ++i) {
      acc += ky[j] * kx[i] * src[((y0 + j) * w + (x0 + i)) * c + ch];
    }
  }
  return acc;
}

TEST(Resize, SameSizeIsIdentity) {
  auto src = Pattern(37, 23, 3);
  std::vector<uint8_t> dst(src.size());
  Resampler r;
  r.Resize(src.data(), 37, 23, 37 * 3, 3, {0, 0, 37, 23}, dst.data(), 37, 23, 37 * 3);
  EXPECT_EQ(dst, src);
}

TEST(Resize, MatchesTheSeparableReferenceWithinOneLevel) {
  auto src = Pattern(300, 210, 3);
  Resampler r;
  // Downscale (both pass orders), upscale, and a sub-pixel box.
  for (Box b : {Box{0, 0, 300, 210}, Box{10.5, 3.25, 290.75, 200.5}, Box{100, 50, 140, 90}}) {
    for (auto [dw, dh] : {std::pair{64, 48}, std::pair{224, 224}, std::pair{120, 300}}) {
      std::vector<uint8_t> dst(static_cast<size_t>(dw) * dh * 3);
      r.Resize(src.data(), 300, 210, 900, 3, b, dst.data(), dw, dh, dw * 3);
      int worst = 0;
      for (int y = 0; y < dh; y += 7) {
        for (int x = 0; x < dw; x += 5) {
          for (int c = 0; c < 3; ++c) {
            double want = RefPixel(src, 300, 210, 3, b, dw, dh, x, y, c);
            worst = std::max(worst,
                             static_cast<int>(std::fabs(dst[(y * dw + x) * 3 + c] - want) + 0.5));
          }
        }
      }
      // Two roundings (after each pass) and fixed-point weights: at most 1-2 levels.
      EXPECT_LE(worst, 2) << b.x0 << "," << b.y0 << " -> " << dw << "x" << dh;
    }
  }
}

TEST(Resize, AntialiasesWhenShrinking) {
  // A 1-pixel checkerboard shrunk 4x must come out flat grey, not aliased stripes.
  std::vector<uint8_t> src(64 * 64);
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 64; ++x) src[y * 64 + x] = ((x + y) % 2) ? 255 : 0;
  std::vector<uint8_t> dst(16 * 16);
  Resampler r;
  r.Resize(src.data(), 64, 64, 64, 1, {0, 0, 64, 64}, dst.data(), 16, 16, 16);
  for (int y = 1; y < 15; ++y)
    for (int x = 1; x < 15; ++x) EXPECT_NEAR(dst[y * 16 + x], 128, 3) << x << "," << y;
}

TEST(Resize, FlipMirrorsTheOutput) {
  auto src = Pattern(50, 40, 3);
  std::vector<uint8_t> a(30 * 20 * 3), b(30 * 20 * 3);
  Resampler r;
  r.Resize(src.data(), 50, 40, 150, 3, {5, 5, 45, 35}, a.data(), 30, 20, 90, false);
  r.Resize(src.data(), 50, 40, 150, 3, {5, 5, 45, 35}, b.data(), 30, 20, 90, true);
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 30; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(a[(y * 30 + x) * 3 + c], b[(y * 30 + 29 - x) * 3 + c]);
}

TEST(Resize, ConstantImagesStayConstant) {
  std::vector<uint8_t> src(80 * 60 * 3, 77), dst(33 * 41 * 3);
  Resampler r;
  r.Resize(src.data(), 80, 60, 240, 3, {3.3, 1.1, 71.7, 58.2}, dst.data(), 33, 41, 99);
  for (uint8_t v : dst) ASSERT_EQ(v, 77);
}

// Lowers the SIMD level for one scope; the default (whatever the CPU has) is back after it, even
// when an assertion returns early.
class ScopedSimd {
 public:
  explicit ScopedSimd(Resampler::Simd level) { Resampler::LimitSimdForTesting(level); }
  ~ScopedSimd() { Resampler::LimitSimdForTesting(Resampler::Simd::kAvx512); }
};

constexpr Resampler::Simd kSimdLevels[] = {Resampler::Simd::kSse41, Resampler::Simd::kAvx2,
                                           Resampler::Simd::kAvx512};

// The SIMD kernels (paired pmaddwd horizontally with SSE4.1 and AVX2, vpermb groups of five pixels
// with AVX-512 VBMI; AVX2 and AVX-512 vertically) and the generic loops compute the same integer
// sums: every byte equal at every level, for kernels of 3, 5, 7, 9, 11 taps and wider (the groups
// take 3 to 7), both pass orders with each (horizontal first: the targets 400x700 and 100x500),
// flips, windows at the image's edges (where the groups' masked loads meet a row's end), odd row
// lengths and partial groups (61, 33 px). On a CPU without a level, the next one down runs: the
// level in use is recorded as the test's property "simd".
TEST(Resize, SimdAndGenericLoopsGiveTheSameBytes) {
  ::testing::Test::RecordProperty("simd", static_cast<int>(Resampler::SimdForTesting()));
  auto src = Pattern(997, 611, 3);
  Resampler r;
  int compared = 0;
  for (Box b : {Box{0, 0, 997, 611}, Box{0.5, 0, 997, 600.25}, Box{313.3, 17.9, 331.1, 40.2},
                Box{900, 500, 997, 611}, Box{1, 2, 650, 333}, Box{500, 0, 997, 300}}) {
    for (auto [dw, dh] : {std::pair{224, 224}, std::pair{61, 37}, std::pair{100, 500},
                          std::pair{33, 17}, std::pair{400, 700}, std::pair{250, 150}}) {
      for (bool flip : {false, true}) {
        std::vector<uint8_t> generic(static_cast<size_t>(dw) * dh * 3, 1);
        {
          ScopedSimd none(Resampler::Simd::kNone);
          r.Resize(src.data(), 997, 611, 997 * 3, 3, b, generic.data(), dw, dh, dw * 3, flip);
        }
        for (Resampler::Simd level : kSimdLevels) {
          ScopedSimd limit(level);
          std::vector<uint8_t> simd(generic.size(), 2);
          r.Resize(src.data(), 997, 611, 997 * 3, 3, b, simd.data(), dw, dh, dw * 3, flip);
          ASSERT_EQ(simd, generic)
              << b.x0 << "," << b.y0 << "-" << b.x1 << "," << b.y1 << " -> " << dw << "x" << dh
              << (flip ? " flipped" : "") << ", level " << static_cast<int>(level);
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 216);
}

// ResizeWindow at every level gives the bytes of the generic loops over the whole image, with the
// window's right edge where the filter's reach ends (the groups' last masked loads stop there).
TEST(Resize, AWindowGivesTheWholeImagesBytesAtEveryLevel) {
  auto src = Pattern(997, 611, 3);
  const Box box{150.5, 80.25, 640, 420};
  const int ox = 140, oy = 70;
  Resampler r;
  for (auto [dw, dh] : {std::pair{224, 224}, std::pair{400, 700}, std::pair{61, 37}}) {
    for (bool flip : {false, true}) {
      std::vector<uint8_t> whole(static_cast<size_t>(dw) * dh * 3, 1);
      {
        ScopedSimd none(Resampler::Simd::kNone);
        r.Resize(src.data(), 997, 611, 997 * 3, 3, box, whole.data(), dw, dh, dw * 3, flip);
      }
      // The narrowest window ResizeWindow accepts: one pixel narrower must be refused.
      int width = 997 - ox;
      std::vector<uint8_t> out(whole.size());
      while (r.ResizeWindow(src.data() + (oy * 997 + ox) * 3, width - 1, 611 - oy, 997 * 3, 3, ox,
                            oy, 997, 611, box, out.data(), dw, dh, dw * 3, flip)) {
        --width;
      }
      for (Resampler::Simd level : kSimdLevels) {
        ScopedSimd limit(level);
        std::vector<uint8_t> window(whole.size(), 2);
        ASSERT_TRUE(r.ResizeWindow(src.data() + (oy * 997 + ox) * 3, width, 611 - oy, 997 * 3, 3,
                                   ox, oy, 997, 611, box, window.data(), dw, dh, dw * 3, flip));
        ASSERT_EQ(window, whole) << dw << "x" << dh << (flip ? " flipped" : "") << ", level "
                                 << static_cast<int>(level) << ", window " << width << " wide";
      }
    }
  }
}

}  // namespace
}  // namespace ddpio::loader
