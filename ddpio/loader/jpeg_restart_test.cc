#include "ddpio/loader/jpeg_restart.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "ddpio/loader/jpeg.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::loader {
namespace {

// A w x h photo-like JPEG (gradients plus noise) with the given subsampling; progressive on
// request.
std::vector<uint8_t> Photo(int w, int h, int subsampling, bool progressive = false,
                           int pixel_format = TJPF_RGB) {
  const int channels = tjPixelSize[pixel_format];
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * channels);
  uint32_t seed = 12345;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c) {
        seed = seed * 1664525 + 1013904223;
        px[(static_cast<size_t>(y) * w + x) * channels + c] =
            static_cast<uint8_t>((x * (c + 1) * 3 + y * 2 + (seed >> 27)) & 0xff);
      }
  tjhandle t = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(t, px.data(), w, 0, h, pixel_format, &out, &size, subsampling, 90,
                        progressive ? TJFLAG_PROGRESSIVE : 0),
            0);
  std::vector<uint8_t> jpeg(out, out + size);
  tjFree(out);
  tjDestroy(t);
  return jpeg;
}

std::vector<uint8_t> Decode(const std::vector<uint8_t>& jpeg, int* w, int* h, int* channels) {
  auto d = JpegDecoder::Create();
  EXPECT_TRUE(d.ok());
  auto info = d->ReadInfo(jpeg);
  EXPECT_TRUE(info.ok()) << info.status();
  std::vector<uint8_t> px;
  if (!info.ok()) return px;
  EXPECT_OK(d->Decode(jpeg, *info, &px));
  *w = info->width, *h = info->height, *channels = info->channels;
  return px;
}

TEST(JpegRestart, TranscodingIsLosslessTilesEveryRowAndComesBack) {
  struct Case {
    int w, h, subsampling;
    bool progressive;
    int format;
  };
  for (const Case& c :
       {Case{333, 250, TJSAMP_420, false, TJPF_RGB}, Case{320, 240, TJSAMP_444, true, TJPF_RGB},
        Case{257, 129, TJSAMP_422, false, TJPF_RGB}, Case{200, 150, TJSAMP_GRAY, false, TJPF_GRAY},
        Case{96, 72, TJSAMP_444, false, TJPF_CMYK}}) {
    const std::vector<uint8_t> original = Photo(c.w, c.h, c.subsampling, c.progressive, c.format);
    EXPECT_CODE(ReadRestartLayout(original), kFailedPrecondition);  // no restart markers yet
    ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> segmented, AddRestartMarkers(original, 4));
    int w0, h0, c0, w1, h1, c1;
    EXPECT_EQ(Decode(original, &w0, &h0, &c0), Decode(segmented, &w1, &h1, &c1))
        << c.w << "x" << c.h;
    ASSERT_OK_AND_ASSIGN(RestartLayout l, ReadRestartLayout(segmented));
    EXPECT_EQ(l.width, c.w);
    EXPECT_EQ(l.height, c.h);
    EXPECT_EQ(l.mcus_per_row % l.interval, 0);
    EXPECT_LE(l.interval, 4);
    EXPECT_EQ(l.offsets.size(), static_cast<size_t>(l.mcu_rows) * l.segments_per_row + 1);
    // And back: the markers removed, the same pixels (the benchmark's ceiling decodes these).
    ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> plain, RemoveRestartMarkers(segmented));
    EXPECT_CODE(ReadRestartLayout(plain), kFailedPrecondition);
    int w2, h2, c2;
    EXPECT_EQ(Decode(plain, &w2, &h2, &c2), Decode(original, &w0, &h0, &c0)) << c.w << "x" << c.h;
  }
}

TEST(JpegRestart, IntervalDividesTheRow) {
  EXPECT_EQ(RestartIntervalFor(21, 4), 3);
  EXPECT_EQ(RestartIntervalFor(32, 4), 4);
  EXPECT_EQ(RestartIntervalFor(13, 4), 1);  // a prime row: one MCU a segment
  EXPECT_EQ(RestartIntervalFor(2, 4), 2);
}

// A band's sub-JPEG decodes to the full image's pixels, exactly away from the band's edges (where
// chroma upsampling reads neighbours the band does not have).
TEST(JpegRestart, SubJpegPixelsAreTheFullImagesAwayFromTheBandEdges) {
  const std::vector<uint8_t> segmented = *AddRestartMarkers(Photo(333, 250, TJSAMP_420), 4);
  ASSERT_OK_AND_ASSIGN(RestartLayout l, ReadRestartLayout(segmented));
  int fw, fh, fc;
  const std::vector<uint8_t> full = Decode(segmented, &fw, &fh, &fc);
  struct Band {
    int row0, row1, col0, col1;
  };
  for (const Band& b :
       {Band{0, l.mcu_rows, 0, l.segments_per_row}, Band{2, 7, 1, 3},
        Band{l.mcu_rows - 3, l.mcu_rows, l.segments_per_row - 2, l.segments_per_row},
        Band{5, 6, 2, 3}}) {
    std::vector<uint8_t> sub;
    ASSERT_OK(BuildSubJpeg(segmented, l, b.row0, b.row1, b.col0, b.col1, &sub));
    int sw, sh, sc;
    const std::vector<uint8_t> px = Decode(sub, &sw, &sh, &sc);
    const int x0 = b.col0 * l.interval * l.mcu_width, y0 = b.row0 * l.mcu_height;
    ASSERT_EQ(sw, std::min(fw, b.col1 * l.interval * l.mcu_width) - x0);
    ASSERT_EQ(sh, std::min(fh, b.row1 * l.mcu_height) - y0);
    int inside_diffs = 0, edge_diffs = 0;
    for (int y = 0; y < sh; ++y)
      for (int x = 0; x < sw; ++x) {
        const bool near_edge = (x < l.mcu_width && x0 > 0) || (y < l.mcu_height && y0 > 0) ||
                               (x >= sw - l.mcu_width && x0 + sw < fw) ||
                               (y >= sh - l.mcu_height && y0 + sh < fh);
        for (int c = 0; c < 3; ++c) {
          const bool differs = px[(static_cast<size_t>(y) * sw + x) * 3 + c] !=
                               full[(static_cast<size_t>(y + y0) * fw + x + x0) * 3 + c];
          (near_edge ? edge_diffs : inside_diffs) += differs;
        }
      }
    EXPECT_EQ(inside_diffs, 0) << "band rows " << b.row0 << "-" << b.row1 << " cols " << b.col0
                               << "-" << b.col1;
  }
  std::vector<uint8_t> sub;
  EXPECT_CODE(BuildSubJpeg(segmented, l, 3, 3, 0, 1, &sub), kInvalidArgument);
  EXPECT_CODE(BuildSubJpeg(segmented, l, 0, l.mcu_rows + 1, 0, 1, &sub), kInvalidArgument);
}

// The band covers the crop and the filter's reach in both modes; the exact band adds a quarter MCU
// on every side (chroma upsampling), the fast band does not, so it is never larger and often
// smaller.
TEST(JpegRestart, TheFastBandCoversTheCropAndIsNeverLargerThanTheExactBand) {
  RestartLayout l;
  l.width = 700, l.height = 525, l.mcu_width = 16, l.mcu_height = 16, l.interval = 4;
  l.mcus_per_row = 44, l.mcu_rows = 33, l.segments_per_row = 11;
  const int seg_w = l.interval * l.mcu_width;
  uint32_t seed = 7;
  auto next = [&](int n) {
    seed = seed * 1664525 + 1013904223;
    return static_cast<int>((seed >> 8) % static_cast<uint32_t>(n));
  };
  int smaller = 0;
  for (int i = 0; i < 500; ++i) {
    const double x0 = next(600), y0 = next(450);
    const double x1 = std::min(700, static_cast<int>(x0) + 40 + next(300));
    const double y1 = std::min(525, static_cast<int>(y0) + 40 + next(300));
    const SegmentBand fast = BandFor(l, x0, y0, x1, y1, 112, /*exact_edges=*/false);
    const SegmentBand exact = BandFor(l, x0, y0, x1, y1, 112, /*exact_edges=*/true);
    const double reach = std::ceil(std::max(1.0, std::max(x1 - x0, y1 - y0) / 112)) + 2;
    for (const SegmentBand& b : {fast, exact}) {
      EXPECT_LE(b.col0 * seg_w, std::max(0.0, std::floor(x0) - reach)) << i;
      EXPECT_GE(std::min(l.width, b.col1 * seg_w), std::min<double>(l.width, std::ceil(x1) + reach))
          << i;
      EXPECT_LE(b.row0 * l.mcu_height, std::max(0.0, std::floor(y0) - reach)) << i;
      EXPECT_GE(std::min(l.height, b.row1 * l.mcu_height),
                std::min<double>(l.height, std::ceil(y1) + reach))
          << i;
    }
    EXPECT_LE(exact.col0 * seg_w, std::max(0.0, std::floor(x0) - reach - l.mcu_width / 4)) << i;
    EXPECT_LE(exact.row0 * l.mcu_height, std::max(0.0, std::floor(y0) - reach - l.mcu_height / 4))
        << i;
    EXPECT_GE(std::min(l.width, exact.col1 * seg_w),
              std::min<double>(l.width, std::ceil(x1) + reach + l.mcu_width / 4))
        << i;
    EXPECT_GE(std::min(l.height, exact.row1 * l.mcu_height),
              std::min<double>(l.height, std::ceil(y1) + reach + l.mcu_height / 4))
        << i;
    EXPECT_TRUE(exact.col0 <= fast.col0 && fast.col1 <= exact.col1 && exact.row0 <= fast.row0 &&
                fast.row1 <= exact.row1)
        << i;
    smaller += (fast.col1 - fast.col0) * (fast.row1 - fast.row0) <
               (exact.col1 - exact.col0) * (exact.row1 - exact.row0);
  }
  EXPECT_GT(smaller, 100);  // many crops read fewer segments in fast mode (208 of these 500)
}

TEST(JpegRestart, DamageIsDataLossOrNotSegmented) {
  const std::vector<uint8_t> segmented = *AddRestartMarkers(Photo(160, 120, TJSAMP_420), 4);
  std::vector<uint8_t> cut(segmented.begin(), segmented.begin() + segmented.size() / 2);
  EXPECT_CODE(ReadRestartLayout(cut), kDataLoss);
  EXPECT_CODE(ReadRestartLayout(std::vector<uint8_t>{0xFF, 0xD8, 0xFF}), kDataLoss);
  // An empty segment ending exactly at the end of the bytes (found by jpeg_restart_fuzz), and a
  // scan header with no payload.
  EXPECT_CODE(ReadRestartLayout(std::vector<uint8_t>{0xFF, 0xD8, 0xFF, 0xFF, 0xBF, 0x00, 0x02}),
              kDataLoss);
  EXPECT_CODE(ReadRestartLayout(std::vector<uint8_t>{0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x0B, 8, 0, 8, 0,
                                                     8, 1, 1, 0x11, 0, 0xFF, 0xDA, 0x00, 0x02}),
              kDataLoss);
  EXPECT_CODE(ReadRestartLayout(Photo(64, 64, TJSAMP_420, /*progressive=*/true)),
              kFailedPrecondition);
  EXPECT_CODE(AddRestartMarkers(cut, 4), kDataLoss);
  // Every prefix: an error, never a crash.
  for (size_t n = 0; n < segmented.size(); n += 7) {
    std::vector<uint8_t> prefix(segmented.begin(), segmented.begin() + n);
    EXPECT_FALSE(ReadRestartLayout(prefix).ok()) << n;
  }
}

// The offsets recorded at conversion give the scanned layout; offsets that do not fit the JPEG
// (a record written by something else, or damaged past its checksum) are DataLoss, not a crash.
TEST(JpegRestart, RecordedOffsetsAreCheckedAgainstTheJpeg) {
  const std::vector<uint8_t> segmented = *AddRestartMarkers(Photo(160, 120, TJSAMP_420), 4);
  ASSERT_OK_AND_ASSIGN(RestartLayout scanned, ReadRestartLayout(segmented));
  const std::vector<uint8_t> recorded = EncodeSegmentOffsets(scanned);
  ASSERT_OK_AND_ASSIGN(RestartLayout l, RestartLayoutFromOffsets(segmented, recorded));
  EXPECT_EQ(l.offsets, scanned.offsets);
  std::vector<uint8_t> shifted = recorded;
  shifted[4 * 3] += 1;  // segment 3 one byte late: not after a restart marker
  EXPECT_CODE(RestartLayoutFromOffsets(segmented, shifted), kDataLoss);
  std::vector<uint8_t> past = recorded;
  past[past.size() - 1] = 0x7f;  // the end far past the JPEG
  EXPECT_CODE(RestartLayoutFromOffsets(segmented, past), kDataLoss);
  EXPECT_CODE(RestartLayoutFromOffsets(segmented,
                                       std::vector<uint8_t>(recorded.begin(), recorded.end() - 4)),
              kDataLoss);
}

}  // namespace
}  // namespace ddpio::loader
