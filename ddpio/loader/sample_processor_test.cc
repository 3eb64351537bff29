#include "ddpio/loader/sample_processor.h"

#include <cmath>

#include "gtest/gtest.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_restart.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"

namespace ddpio::loader {
namespace {

storage::Record JpegRecord(int w, int h, uint64_t seed) {
  storage::Record r;
  r.channels = 3;
  r.width = static_cast<uint32_t>(w);
  r.height = static_cast<uint32_t>(h);
  r.payload = testing::MakeJpeg(w, h, seed);
  return r;
}

TEST(SampleProcessor, ExactModeIsFullDecodeThenCropAndResize) {
  storage::Record r = JpegRecord(333, 250, 4);
  AugmentOptions o;
  o.size = 96;
  ASSERT_OK_AND_ASSIGN(JpegDecoder full, JpegDecoder::Create());
  ASSERT_OK_AND_ASSIGN(JpegInfo info, full.ReadInfo(r.payload));
  std::vector<uint8_t> pixels;
  ASSERT_OK(full.Decode(r.payload, info, &pixels));
  SampleProcessor p;
  Resampler reference;
  for (uint64_t index = 0; index < 20; ++index) {
    std::vector<uint8_t> got(96 * 96 * 3), want(96 * 96 * 3);
    ASSERT_OK(p.Process(r.view(), index, 1, 2, o, DecodeMode::kExact, got.data()));
    SampleGeometry g = PlanSample(333, 250, o, 2, 1, index);
    reference.Resize(pixels.data(), 333, 250, 333 * 3, 3, g.box, want.data(), 96, 96, 96 * 3, g.flip);
    ASSERT_EQ(got, want) << "index " << index;
  }
}

TEST(SampleProcessor, FastModeIsCloseToExactAndScalesInTheDctDomain) {
  AugmentOptions o;
  o.size = 64;
  SampleProcessor p;
  double total_diff = 0;
  int scaled = 0, samples = 0;
  for (uint64_t index = 0; index < 40; ++index) {
    storage::Record r = JpegRecord(400 + static_cast<int>(index) * 7, 300 + static_cast<int>(index) * 3, index);
    std::vector<uint8_t> fast(64 * 64 * 3), exact(64 * 64 * 3);
    ASSERT_OK(p.Process(r.view(), index, 0, 0, o, DecodeMode::kFast, fast.data()));
    scaled += p.last_scale_denom() > 1;
    ASSERT_OK(p.Process(r.view(), index, 0, 0, o, DecodeMode::kExact, exact.data()));
    EXPECT_EQ(p.last_scale_denom(), 1);
    double diff = 0;
    for (size_t i = 0; i < fast.size(); ++i) diff += std::abs(fast[i] - exact[i]);
    total_diff += diff / fast.size();
    ++samples;
  }
  EXPECT_GT(scaled, 10);  // crops of 400px images shrunk to 64px are decoded at 1/2 or less
  EXPECT_LT(total_diff / samples, 4.0) << "mean absolute difference fast vs exact";
}

TEST(SampleProcessor, CorruptAndMismatchedImagesAreDataLoss) {
  AugmentOptions o;
  o.size = 32;
  SampleProcessor p;
  std::vector<uint8_t> out(32 * 32 * 3);
  storage::Record r = JpegRecord(100, 80, 1);
  storage::Record cut = r;
  cut.payload.resize(cut.payload.size() / 2);
  EXPECT_CODE(p.Process(cut.view(), 0, 0, 0, o, DecodeMode::kExact, out.data()), kDataLoss);
  EXPECT_CODE(p.Process(cut.view(), 0, 0, 0, o, DecodeMode::kFast, out.data()), kDataLoss);
  storage::Record lying = r;
  lying.width = 120;  // stored geometry disagrees with the JPEG
  EXPECT_CODE(p.Process(lying.view(), 0, 0, 0, o, DecodeMode::kFast, out.data()), kDataLoss);
  EXPECT_OK(p.Process(r.view(), 0, 0, 0, o, DecodeMode::kFast, out.data()));  // recovers
}

// With restart markers, exact mode decodes only the crop's segments and stays bit-identical to
// "full decode, then crop and resize" — for train crops (RandomResizedCrop + flip) and the eval
// geometry, across image sizes whose MCUs do and do not divide the row, 4:2:0, 4:4:4 and gray.
TEST(SampleProcessor, SegmentDecodeIsBitIdenticalToTheFullDecodeInExactMode) {
  struct Image {
    int w, h;
    uint64_t seed;
  };
  int segment_samples = 0, samples = 0;
  for (const Image& im : {Image{500, 375, 1}, Image{333, 250, 2}, Image{640, 427, 3}, Image{375, 500, 4},
                          Image{257, 193, 5}}) {
    storage::Record r = JpegRecord(im.w, im.h, im.seed);
    ASSERT_OK_AND_ASSIGN(r.payload, AddRestartMarkers(r.payload, 4));
    for (bool train : {true, false}) {
      AugmentOptions o;
      o.size = 112;
      if (!train) {
        o.train = false;
        o.resize_size = 128;
      }
      SampleProcessor segments, whole;
      whole.set_segment_decode(false);
      for (uint64_t epoch = 0; epoch < 2; ++epoch) {
        for (uint64_t index = 0; index < 12; ++index) {
          std::vector<uint8_t> got(112 * 112 * 3), want(112 * 112 * 3);
          ASSERT_OK(segments.Process(r.view(), index, epoch, 7, o, DecodeMode::kExact, got.data()));
          ASSERT_OK(whole.Process(r.view(), index, epoch, 7, o, DecodeMode::kExact, want.data()));
          ASSERT_FALSE(whole.last_used_segments());
          ASSERT_EQ(got, want) << im.w << "x" << im.h << (train ? " train" : " eval") << " epoch " << epoch
                               << " index " << index;
          segment_samples += segments.last_used_segments();
          ++samples;
        }
      }
    }
  }
  EXPECT_GT(segment_samples, samples / 2);  // most crops leave segments out
}

}  // namespace
}  // namespace ddpio::loader
