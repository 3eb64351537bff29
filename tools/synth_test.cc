#include "tools/synth.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "ddpio/loader/jpeg.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::tools {
namespace {

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(Synth, SameSeedSameBytesWhateverTheThreads) {
  testing::TempDir dir;
  SynthOptions a{dir.Sub("a"), 3, 4, 32, 11, 90, 1, false};
  SynthOptions b{dir.Sub("b"), 3, 4, 32, 11, 90, 4, false};
  SynthOptions c{dir.Sub("c"), 3, 4, 32, 12, 90, 2, false};
  ASSERT_OK_AND_ASSIGN(SynthSummary sa, RunSynth(a));
  ASSERT_OK(RunSynth(b));
  ASSERT_OK(RunSynth(c));
  EXPECT_EQ(sa.images, 12u);
  int differ_c = 0;
  for (int cls = 0; cls < 3; ++cls) {
    for (int i = 0; i < 4; ++i) {
      auto rel =
          std::filesystem::path(SynthClassName(cls, 3)) / ("img_0000" + std::to_string(i) + ".jpg");
      std::string fa = Slurp(dir.path() / "a" / rel);
      ASSERT_FALSE(fa.empty()) << rel;
      EXPECT_EQ(fa, Slurp(dir.path() / "b" / rel)) << rel;
      differ_c += fa != Slurp(dir.path() / "c" / rel);
    }
  }
  EXPECT_EQ(differ_c, 12);  // another seed changes every image
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("a") + ".partial"));
}

TEST(Synth, ImagesAreValidJpegsWithJitteredSizes) {
  testing::TempDir dir;
  ASSERT_OK(RunSynth({dir.Sub("s"), 2, 20, 40, 0, 90, 2, false}));
  ASSERT_OK_AND_ASSIGN(auto decoder, loader::JpegDecoder::Create());
  std::set<int> widths;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir.Sub("s"))) {
    if (!e.is_regular_file()) continue;
    std::string bytes = Slurp(e.path());
    auto span = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ASSERT_OK_AND_ASSIGN(loader::JpegInfo info, decoder.ReadInfo(span));
    std::vector<uint8_t> px;
    ASSERT_OK(decoder.Decode(span, info, &px));
    EXPECT_GE(info.width, 32);
    EXPECT_LE(info.width, 50);
    widths.insert(info.width);
  }
  EXPECT_GT(widths.size(), 3u);
}

TEST(Synth, RefusesExistingOutputAndBadArguments) {
  testing::TempDir dir;
  EXPECT_CODE(RunSynth({dir.path().string(), 2, 2, 32, 0, 90, 1, false}), kAlreadyExists);
  EXPECT_CODE(RunSynth({dir.Sub("x"), 0, 2, 32, 0, 90, 1, false}), kInvalidArgument);
  EXPECT_CODE(RunSynth({dir.Sub("x"), 2, 2, 4, 0, 90, 1, false}), kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::tools
