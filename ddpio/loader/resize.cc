#include "ddpio/loader/resize.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>

#include "ddpio/loader/internal/resize_kernels.h"

namespace ddpio::loader {

using internal::kPrecisionBits;
using internal::PackPair;
using internal::SimdLevel;

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

// Resampler::Simd and internal::SimdLevel name the same levels in the same order.
static_assert(static_cast<int>(Resampler::Simd::kAvx512) == static_cast<int>(SimdLevel::kAvx512));

void Resampler::LimitSimdForTesting(Simd level) {
  internal::LimitSimd(static_cast<SimdLevel>(level));
}

Resampler::Simd Resampler::SimdForTesting() { return static_cast<Simd>(internal::Simd()); }

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
  if (channels != 3 || k > 11 || internal::Simd() < SimdLevel::kSse41) return;
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
  if (pairs_per_pixel_ == 0 || end - begin < 2 || internal::Simd() < SimdLevel::kAvx2) {
    return nullptr;
  }
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

bool Resampler::PrepareGroups(int row_pixels) {
  group_count_ = 0;
  const int p = pairs_per_pixel_;
  if (p == 0 || p > 4 || internal::Simd() < SimdLevel::kAvx512) return false;
  const std::vector<int>& start = horizontal_.start;
  const int n = static_cast<int>(start.size());
  const size_t groups = (static_cast<size_t>(n) + 4) / 5;
  group_records_.resize(groups * internal::GroupRecordBytes(p));
  for (size_t g = 0; g < groups; ++g) {
    uint8_t* record = &group_records_[g * internal::GroupRecordBytes(p)];
    internal::PixelGroup group;
    group.x0 = static_cast<int>(g) * 5;
    group.count = std::min(5, n - group.x0);
    const auto [lo, hi] =
        std::minmax_element(start.begin() + group.x0, start.begin() + group.x0 + group.count);
    if ((*hi - *lo) * 3 + 6 * p > 64) return false;  // past the 64 loaded bytes: the paired kernels
    group.base = *lo;
    const int readable = (row_pixels - group.base) * 3;  // bytes from the first loaded pixel
    group.load_mask = readable >= 64 ? ~uint64_t{0} : (uint64_t{1} << readable) - 1;
    std::memcpy(record, &group, sizeof(group));
    for (int i = 0; i < p; ++i) {
      uint8_t* index = record + internal::kGroupHeaderBytes + i * internal::kGroupPairBytes;
      uint8_t* weights = index + 64;
      for (int lane = 0; lane < 16; ++lane) {  // a partial group's other lanes weigh nothing
        const int k = lane / 3, c = lane % 3;
        const int x = group.x0 + k;
        const bool used = k < group.count;
        // The pair's first tap, in bytes from base; vpermb reads only these two index bytes.
        const int tap = used ? (start[x] - group.base) * 3 + 6 * i + c : 0;
        index[4 * lane] = static_cast<uint8_t>(tap);
        index[4 * lane + 2] = static_cast<uint8_t>(used ? tap + 3 : 0);
        const uint32_t pair = used ? pairs_[static_cast<size_t>(x) * p + i] : 0;
        std::memcpy(weights + 4 * lane, &pair, 4);
      }
    }
  }
  group_count_ = groups;
  return groups > 0;
}

void Resampler::PrepareRows(int row_pixels) {
  simd_begin_ = simd_end_ = 0;
  wide_rows_ = nullptr;
  if (PrepareGroups(row_pixels)) return;
  std::tie(simd_begin_, simd_end_) = SimdRange(row_pixels);
  wide_rows_ = PrepareWide(simd_begin_, simd_end_);
}

void Resampler::HorizontalPassRow(const uint8_t* in, int channels, uint8_t* out) const {
  const Weights& h = horizontal_;
  if (group_count_ > 0) {
    internal::HorizontalGroups(pairs_per_pixel_, in, group_records_.data(), group_count_, out);
    return;
  }
  if (simd_begin_ < simd_end_) {
    internal::HorizontalPairs(pairs_per_pixel_, in, h.start.data(), pairs_.data(), wide_rows_,
                              simd_begin_, simd_end_, out);
  }
  const int n = static_cast<int>(h.start.size());
  internal::HorizontalRow(in, channels, h.start, h.count, h.w, h.ksize, 0, simd_begin_, out);
  internal::HorizontalRow(in, channels, h.start, h.count, h.w, h.ksize, simd_end_, n, out);
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
    // Each intermediate row is followed by kPad zero pixels for the paired kernels' reads.
    constexpr int kPad = 8;
    const size_t mid_stride = mid_bytes + kPad * channels;
    rows_.resize(static_cast<size_t>(dst_h) * mid_stride);
    acc_.resize(mid_bytes);
    for (int y = 0; y < dst_h; ++y) {
      internal::VerticalRow(
          src + static_cast<size_t>(vertical_.start[y]) * src_stride +
              static_cast<size_t>(col0) * channels,
          static_cast<size_t>(src_stride), &vertical_.w[static_cast<size_t>(y) * vertical_.ksize],
          vertical_.count[y], mid_bytes, acc_.data(), rows_.data() + y * mid_stride);
      std::memset(rows_.data() + y * mid_stride + mid_bytes, 0, mid_stride - mid_bytes);
    }
    // Horizontal starts are relative to col0 in the intermediate rows.
    for (int x = 0; x < dst_w; ++x) horizontal_.start[x] -= col0;
    PrepareRows(ncols + kPad);
    for (int y = 0; y < dst_h; ++y) {
      HorizontalPassRow(rows_.data() + y * mid_stride, channels,
                        dst + static_cast<size_t>(y) * dst_stride);
    }
  } else {
    const size_t row_bytes = static_cast<size_t>(dst_w) * channels;
    rows_.resize(static_cast<size_t>(nrows) * row_bytes);
    acc_.resize(row_bytes);
    PrepareRows(src_w);
    for (int r = 0; r < nrows; ++r) {
      HorizontalPassRow(src + static_cast<size_t>(row0 + r) * src_stride, channels,
                        rows_.data() + static_cast<size_t>(r) * row_bytes);
    }
    for (int y = 0; y < dst_h; ++y) {
      internal::VerticalRow(
          rows_.data() + static_cast<size_t>(vertical_.start[y] - row0) * row_bytes, row_bytes,
          &vertical_.w[static_cast<size_t>(y) * vertical_.ksize], vertical_.count[y], row_bytes,
          acc_.data(), dst + static_cast<size_t>(y) * dst_stride);
    }
  }
}

}  // namespace ddpio::loader
