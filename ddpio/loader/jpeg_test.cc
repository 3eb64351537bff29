#include "ddpio/loader/jpeg.h"

#include <turbojpeg.h>

#include <cstdlib>

#include "ddpio/loader/jpeg_region.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::loader {
namespace {

// A w x h RGB JPEG of a horizontal gradient.
std::vector<uint8_t> MakeJpeg(int w, int h, int quality = 95) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) rgb[(y * w + x) * 3 + c] = static_cast<uint8_t>(x * 255 / w);
  tjhandle h_ = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  tjCompress2(h_, rgb.data(), w, 0, h, TJPF_RGB, &out, &size, TJSAMP_444, quality, 0);
  std::vector<uint8_t> jpeg(out, out + size);
  tjFree(out);
  tjDestroy(h_);
  return jpeg;
}

TEST(Jpeg, ReadsGeometryAndDecodes) {
  std::vector<uint8_t> jpeg = MakeJpeg(37, 21);
  ASSERT_OK_AND_ASSIGN(JpegDecoder d, JpegDecoder::Create());
  ASSERT_OK_AND_ASSIGN(JpegInfo info, d.ReadInfo(jpeg));
  EXPECT_EQ(info.width, 37);
  EXPECT_EQ(info.height, 21);
  EXPECT_EQ(info.channels, 3);
  std::vector<uint8_t> px;
  ASSERT_OK(d.Decode(jpeg, info, &px));
  ASSERT_EQ(px.size(), 37u * 21 * 3);
  EXPECT_LT(px[0], 20);              // left edge dark
  EXPECT_GT(px[(37 - 1) * 3], 220);  // right edge bright
}

TEST(Jpeg, NonJpegInputIsNamed) {
  ASSERT_OK_AND_ASSIGN(JpegDecoder d, JpegDecoder::Create());
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};
  auto r = d.ReadInfo(png);
  EXPECT_CODE(r, kDataLoss);
  EXPECT_NE(r.status().message().find("PNG"), absl::string_view::npos);
  EXPECT_CODE(d.ReadInfo({}), kDataLoss);
}

TEST(Jpeg, TruncatedDataIsDataLossNotAGreyImage) {
  std::vector<uint8_t> jpeg = MakeJpeg(64, 64);
  std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + jpeg.size() * 2 / 3);
  ASSERT_OK_AND_ASSIGN(JpegDecoder d, JpegDecoder::Create());
  ASSERT_OK_AND_ASSIGN(JpegInfo info, d.ReadInfo(cut));  // the header is intact
  std::vector<uint8_t> px;
  EXPECT_CODE(d.Decode(cut, info, &px), kDataLoss);
}

TEST(Jpeg, DecoderRecoversAfterAnError) {
  // Cut a file at every length inside its header: each failure must leave the decoder able to
  // read the next, intact file (seen failing: a good file read as 0x0 after "missing SOS").
  std::vector<uint8_t> good = MakeJpeg(16, 8);
  ASSERT_OK_AND_ASSIGN(JpegDecoder d, JpegDecoder::Create());
  int failures = 0;
  for (size_t cut = 3; cut < good.size(); ++cut) {
    std::vector<uint8_t> bad(good.begin(), good.begin() + cut);
    if (d.ReadInfo(bad).ok()) continue;
    ++failures;
    ASSERT_OK_AND_ASSIGN(JpegInfo info, d.ReadInfo(good));
    EXPECT_EQ(info.width, 16) << "after a header cut at " << cut;
    EXPECT_EQ(info.height, 8) << "after a header cut at " << cut;
  }
  EXPECT_GT(failures, 10);
}

// Pillow's rule (PIL/JpegImagePlugin.py "CMYK;I", Convert.c cmyk2rgb) at its corners and a
// value that shows the rounding.
TEST(Jpeg, CmykToRgbIsPillowsInvertedAdobeConversion) {
  const uint8_t cmyk[] = {255, 255, 255, 255,  // stored 255 = no ink: white
                          0,   0,   0,   255,  // full C, M, Y, no black: black
                          0,   128, 255, 0,    // full black
                          100, 200, 30,  180};
  uint8_t rgb[12];
  CmykToRgb(cmyk, 4, rgb);
  const auto pil = [](int c, int k) {  // k - MULDIV255(255 - c, k), Pillow's integer rounding
    const int t = (255 - c) * k + 128;
    return k - (((t >> 8) + t) >> 8);
  };
  EXPECT_EQ(std::vector<int>(rgb, rgb + 3), (std::vector<int>{255, 255, 255}));
  EXPECT_EQ(std::vector<int>(rgb + 3, rgb + 6), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(std::vector<int>(rgb + 6, rgb + 9), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(std::vector<int>(rgb + 9, rgb + 12),
            (std::vector<int>{pil(100, 180), pil(200, 180), pil(30, 180)}));
  EXPECT_EQ(rgb[9], 71);  // 100 * 180 / 255 = 70.6
}

// The loader's decoder turns a CMYK JPEG into the RGB of TurboJPEG's CMYK decode + CmykToRgb,
// whole and through a cropped, DCT-scaled decode.
TEST(Jpeg, RegionDecoderConvertsCmykJpegsToRgb) {
  const int w = 64, h = 48;
  std::vector<uint8_t> cmyk(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < cmyk.size(); ++i) cmyk[i] = static_cast<uint8_t>((i * 7) ^ (i >> 5));
  tjhandle enc = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(enc, cmyk.data(), w, 0, h, TJPF_CMYK, &out, &size, TJSAMP_444, 95, 0), 0);
  std::vector<uint8_t> jpeg(out, out + size);
  tjFree(out);
  tjDestroy(enc);
  ASSERT_OK_AND_ASSIGN(JpegDecoder tj, JpegDecoder::Create());
  ASSERT_OK_AND_ASSIGN(JpegInfo info, tj.ReadInfo(jpeg));
  ASSERT_EQ(info.channels, 4);
  std::vector<uint8_t> decoded_cmyk, want(static_cast<size_t>(w) * h * 3);
  ASSERT_OK(tj.Decode(jpeg, info, &decoded_cmyk));
  CmykToRgb(decoded_cmyk.data(), static_cast<size_t>(w) * h, want.data());

  RegionDecoder region_decoder;
  std::vector<uint8_t> px;
  DecodedRegion region;
  ASSERT_OK(region_decoder.Decode(jpeg, Box{0, 0, w, h}, w, h, false, /*full=*/true, false, &px,
                                  &region));
  ASSERT_EQ(region.width, w);
  ASSERT_EQ(region.height, h);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), px.begin()));
  // A crop of the bottom-right quarter: the decoded rows are the same pixels of the same image.
  ASSERT_OK(region_decoder.Decode(jpeg, Box{32, 24, 64, 48}, 16, 12, false, /*full=*/false, false,
                                  &px, &region));
  const int x0 = static_cast<int>(32 - region.box.x0), y0 = static_cast<int>(24 - region.box.y0);
  int mismatches = 0;
  for (int y = 0; y < region.height; ++y)
    for (int x = 0; x < region.width * 3; ++x)
      mismatches += std::abs(px[static_cast<size_t>(y) * region.width * 3 + x] -
                             want[static_cast<size_t>(y + y0) * w * 3 + x0 * 3 + x]) > 1;
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace ddpio::loader
