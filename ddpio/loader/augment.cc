#include "ddpio/loader/augment.h"

#include <algorithm>
#include <cmath>

#include "ddpio/common/splitmix64.h"

namespace ddpio::loader {
namespace {

// SplitMix64 keyed by (seed, epoch, index): fully specified, so every machine and thread draws
// the same numbers for a sample.
class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t index)
      : state_(Mix(Mix(Mix(seed ^ 0x5DEECE66Dull) ^ epoch) ^ index)) {}
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(Next() >> 11) * 0x1.0p-53);
  }
  // Uniform integer in [lo, hi] (inclusive), as torch.randint(lo, hi + 1).
  int Int(int lo, int hi) {
    uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int>(Next() % span);
  }

 private:
  // Each draw mixes state + 2 gamma (the gamma is added once here and once in Mix): not the
  // textbook sequence, kept because every augmentation ddpio has drawn depends on it.
  static uint64_t Mix(uint64_t z) { return SplitMix64Mix(z + kSplitMix64Gamma); }
  uint64_t Next() { return Mix(state_ += kSplitMix64Gamma); }
  uint64_t state_;
};

// Python's round(): half to even.
int PyRound(double x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace

CropParams RandomResizedCropParams(int width, int height, const AugmentOptions& o, uint64_t seed,
                                   uint64_t epoch, uint64_t index, bool* flip) {
  SampleRng rng(seed, epoch, index);
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(o.ratio_min), log_hi = std::log(o.ratio_max);
  CropParams c;
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target_area = area * rng.Uniform(o.scale_min, o.scale_max);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const int w = PyRound(std::sqrt(target_area * aspect));
    const int h = PyRound(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      c.i = rng.Int(0, height - h);
      c.j = rng.Int(0, width - w);
      c.h = h;
      c.w = w;
      found = true;
    }
  }
  if (!found) {  // torchvision's fallback: central crop
    const double in_ratio = static_cast<double>(width) / height;
    if (in_ratio < std::min(o.ratio_min, o.ratio_max)) {
      c.w = width;
      c.h = PyRound(c.w / std::min(o.ratio_min, o.ratio_max));
    } else if (in_ratio > std::max(o.ratio_min, o.ratio_max)) {
      c.h = height;
      c.w = PyRound(c.h * std::max(o.ratio_min, o.ratio_max));
    } else {
      c.w = width;
      c.h = height;
    }
    c.i = (height - c.h) / 2;
    c.j = (width - c.w) / 2;
  }
  // The flip draw comes after the crop draws, from the same per-sample stream.
  if (flip != nullptr) *flip = o.flip_probability > 0 && rng.Uniform(0, 1) < o.flip_probability;
  return c;
}

SampleGeometry PlanSample(int width, int height, const AugmentOptions& o, uint64_t seed,
                          uint64_t epoch, uint64_t index) {
  SampleGeometry g;
  if (o.train) {
    CropParams c = RandomResizedCropParams(width, height, o, seed, epoch, index, &g.flip);
    g.box = {static_cast<double>(c.j), static_cast<double>(c.i), static_cast<double>(c.j + c.w),
             static_cast<double>(c.i + c.h)};
    return g;
  }
  // Resize(r): the shorter side becomes r, the longer int(r * long / short) (torchvision).
  const int cw = o.out_width(), ch = o.out_height();
  const int r = o.resize_size > 0 ? o.resize_size : std::max(cw, ch) * 256 / 224;
  int new_w, new_h;
  if (width <= height) {
    new_w = r;
    new_h = static_cast<int>(static_cast<int64_t>(r) * height / width);
  } else {
    new_h = r;
    new_w = static_cast<int>(static_cast<int64_t>(r) * width / height);
  }
  // CenterCrop((h, w)): top = round((new_h - h) / 2), left = round((new_w - w) / 2) (torchvision).
  const int top = PyRound((new_h - ch) / 2.0), left = PyRound((new_w - cw) / 2.0);
  const double sx = static_cast<double>(width) / new_w, sy = static_cast<double>(height) / new_h;
  g.box = {left * sx, top * sy, (left + cw) * sx, (top + ch) * sy};
  // A crop larger than the resized image would pad in torchvision; clamp to the image instead.
  g.box.x0 = std::max(0.0, g.box.x0);
  g.box.y0 = std::max(0.0, g.box.y0);
  g.box.x1 = std::min<double>(width, g.box.x1);
  g.box.y1 = std::min<double>(height, g.box.y1);
  return g;
}

}  // namespace ddpio::loader
