#include "ddpio/loader/image_sample_kind.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"

namespace ddpio::loader {
namespace {

LoaderOptions Options(OutputFormat output) {
  LoaderOptions o;
  o.augment.size = 24;
  o.augment.height = 16;
  o.output = output;
  o.seed = 9;
  return o;
}

TEST(ImageSampleKind, Uint8IsTheProcessorsPixelsAndFloatTheirNormalisedPlanes) {
  const LoaderOptions u = Options(OutputFormat::kUint8Nhwc), f = Options(OutputFormat::kFloatNchw);
  ASSERT_OK_AND_ASSIGN(auto uint8_kind, ImageSampleKind::Create(u));
  ASSERT_OK_AND_ASSIGN(auto float_kind, ImageSampleKind::Create(f));
  const size_t plane = 24 * 16;
  ASSERT_EQ(uint8_kind->sample_bytes(), plane * 3);
  ASSERT_EQ(float_kind->sample_bytes(), plane * 3 * sizeof(float));
  auto uw = uint8_kind->NewWorker();
  auto fw = float_kind->NewWorker();
  SampleProcessor reference;
  const storage::Record r = testing::JpegRecord(testing::MakeJpeg(61, 47, 3), 61, 47, 3, 2);
  for (uint64_t index = 0; index < 6; ++index) {
    std::vector<uint8_t> want(plane * 3), got(plane * 3);
    std::vector<float> planes(plane * 3);
    ASSERT_OK(reference.Process(r.view(), index, 4, u.seed, u.augment, u.decode, want.data()));
    SampleNanos un, fn;
    ASSERT_OK(uw->Fill(r.view(), index, 4, absl::MakeSpan(got), &un));
    ASSERT_OK(fw->Fill(r.view(), index, 4,
                       absl::MakeSpan(reinterpret_cast<uint8_t*>(planes.data()), plane * 12), &fn));
    EXPECT_EQ(got, want) << "index " << index;
    EXPECT_EQ(un.collate, 0u) << "uint8 output has no conversion";
    for (size_t i = 0; i < plane; ++i) {
      for (int c = 0; c < 3; ++c) {
        const float v = (want[3 * i + c] / 255.0f - f.mean[c]) / f.stddev[c];
        ASSERT_FLOAT_EQ(planes[c * plane + i], v)
            << "index " << index << " pixel " << i << " c " << c;
      }
    }
  }
}

TEST(ImageSampleKind, ACorruptImageIsDataLossAndItsStandInIsZeros) {
  ASSERT_OK_AND_ASSIGN(auto kind, ImageSampleKind::Create(Options(OutputFormat::kFloatNchw)));
  auto worker = kind->NewWorker();
  std::vector<uint8_t> jpeg = testing::MakeJpeg(61, 47, 3);
  jpeg.resize(jpeg.size() / 2);
  const storage::Record r = testing::JpegRecord(jpeg, 61, 47, 3, 2);
  std::vector<uint8_t> out(kind->sample_bytes(), 0x5a);
  SampleNanos nanos;
  EXPECT_CODE(worker->Fill(r.view(), 0, 0, absl::MakeSpan(out), &nanos), kDataLoss);
  worker->Zero(absl::MakeSpan(out));
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t v) { return v == 0; }));
}

TEST(ImageSampleKind, TheOutputSizeMustBePositive) {
  LoaderOptions o = Options(OutputFormat::kUint8Nhwc);
  o.augment.size = 0;
  EXPECT_CODE(ImageSampleKind::Create(o), kInvalidArgument);
  o.augment.size = 24;
  o.augment.height = -1;
  EXPECT_CODE(ImageSampleKind::Create(o), kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::loader
