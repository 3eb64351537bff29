#include "ddpio/loader/sample_processor.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_restart.h"
#include "gtest/gtest.h"
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
    reference.Resize(pixels.data(), 333, 250, 333 * 3, 3, g.box, want.data(), 96, 96, 96 * 3,
                     g.flip);
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
    storage::Record r =
        JpegRecord(400 + static_cast<int>(index) * 7, 300 + static_cast<int>(index) * 3, index);
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
// geometry, across image sizes whose MCUs do and do not divide the row, for smooth images and for
// images with strong chroma detail in every subsampling (where a band too tight for chroma
// upsampling shows at once), and gray.
TEST(SampleProcessor, SegmentDecodeIsBitIdenticalToTheFullDecodeInExactMode) {
  struct Image {
    int w, h;
    uint64_t seed;
    int subsampling;  // -1: MakeJpeg's smooth 4:2:0 pattern
  };
  for (const Image& im : {Image{500, 375, 1, -1}, Image{333, 250, 2, -1}, Image{640, 427, 3, -1},
                          Image{375, 500, 4, -1}, Image{257, 193, 5, -1},
                          Image{500, 375, 6, TJSAMP_420}, Image{333, 250, 7, TJSAMP_422},
                          Image{375, 500, 8, TJSAMP_440}, Image{450, 300, 9, TJSAMP_444},
                          Image{400, 300, 10, TJSAMP_411}, Image{257, 193, 11, TJSAMP_GRAY}}) {
    storage::Record r = JpegRecord(im.w, im.h, im.seed);
    if (im.subsampling >= 0)
      r.payload = testing::MakeDetailedJpeg(im.w, im.h, im.seed, im.subsampling);
    ASSERT_OK_AND_ASSIGN(r.payload, AddRestartMarkers(r.payload, 4));
    int segment_samples = 0, samples = 0;  // of this image
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
          ASSERT_EQ(got, want) << im.w << "x" << im.h << " subsampling " << im.subsampling
                               << (train ? " train" : " eval") << " epoch " << epoch << " index "
                               << index;
          segment_samples += segments.last_used_segments();
          ++samples;
        }
      }
    }
    // Most crops leave segments out; a band the resampler cannot serve falls back to the whole
    // stream silently, which this catches per image (every subsampling).
    EXPECT_GT(segment_samples, samples / 2)
        << im.w << "x" << im.h << " subsampling " << im.subsampling;
  }
}

// Fast mode from the crop's segments reads a band without the exact band's chroma margin (only
// the filter's outermost taps can see band-edge chroma): measured against exact mode, it is about
// as close as fast mode over the whole entropy stream, and most crops take the segment path.
TEST(SampleProcessor, FastModeFromSegmentsIsAsCloseToExactAsFastModeFromTheWholeStream) {
  int segment_samples = 0, samples = 0;
  double from_segments = 0, from_whole = 0;
  auto mean_diff = [](const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d += std::abs(a[i] - b[i]);
    return d / static_cast<double>(a.size());
  };
  for (uint64_t seed : {11, 12, 13}) {
    storage::Record r = JpegRecord(640, 427, seed);
    ASSERT_OK_AND_ASSIGN(r.payload, AddRestartMarkers(r.payload, 4));
    AugmentOptions o;
    o.size = 112;
    SampleProcessor segments, whole;
    whole.set_segment_decode(false);
    for (uint64_t index = 0; index < 30; ++index) {
      std::vector<uint8_t> fast_segments(112 * 112 * 3), fast_whole(112 * 112 * 3),
          exact(112 * 112 * 3);
      ASSERT_OK(
          segments.Process(r.view(), index, 0, 3, o, DecodeMode::kFast, fast_segments.data()));
      segment_samples += segments.last_used_segments();
      ASSERT_OK(whole.Process(r.view(), index, 0, 3, o, DecodeMode::kFast, fast_whole.data()));
      ASSERT_OK(whole.Process(r.view(), index, 0, 3, o, DecodeMode::kExact, exact.data()));
      from_segments += mean_diff(fast_segments, exact);
      from_whole += mean_diff(fast_whole, exact);
      ++samples;
    }
  }
  EXPECT_GT(segment_samples, samples / 2);
  std::printf("mean |fast - exact|: %.3f from segments, %.3f from the whole stream\n",
              from_segments / samples, from_whole / samples);
  EXPECT_LT(from_segments, 1.1 * from_whole);
}

}  // namespace
}  // namespace ddpio::loader
