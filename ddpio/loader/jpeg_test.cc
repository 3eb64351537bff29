#include "ddpio/loader/jpeg.h"

#include <turbojpeg.h>

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
  EXPECT_LT(px[0], 20);                 // left edge dark
  EXPECT_GT(px[(37 - 1) * 3], 220);     // right edge bright
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

}  // namespace
}  // namespace ddpio::loader
