// `ddpio bench loader` as users run it, on a converted synth dataset.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

using testing::LastLine;
using testing::RunDdpio;
using testing::RunResult;

// Photo-like JPEGs (classes x per_class of about `size` px) in dir/src, converted to dir/db.
void MakeDataset(const testing::TempDir& dir, const std::string& classes,
                 const std::string& per_class, const std::string& size) {
  ASSERT_EQ(RunDdpio({"synth", "--out", dir.Sub("src"), "--classes", classes, "--per-class",
                      per_class, "--size", size, "--quiet"})
                .exit_code,
            0);
  ASSERT_EQ(
      RunDdpio({"convert", "--src", dir.Sub("src"), "--out", dir.Sub("db"), "--quiet"}).exit_code,
      0);
}

TEST(CliLoader, BenchReportsImagesPerSecondNextToItsCeiling) {
  testing::TempDir dir;
  ASSERT_NO_FATAL_FAILURE(MakeDataset(dir, "3", "20", "64"));
  for (std::string decode : {"fast", "exact"}) {
    RunResult r = RunDdpio({"bench", "loader", "--data", dir.Sub("db"), "--workers", "2",
                            "--batch-size", "16", "--image-size", "32", "--epochs", "2", "--decode",
                            decode, "--output", "float", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(LastLine(r.out));
    EXPECT_EQ(j["decode"], decode);
    EXPECT_GT(j["images_per_s"].get<double>(), 0);
    EXPECT_GT(j["ceiling_images_per_s"].get<double>(), 0);
    // The ceiling is measured as the loader runs: 2 decoders at once, before each of the 2 epochs
    // and after the last; each epoch's ratio against the ceilings around it (no speed asserted).
    EXPECT_EQ(j["ceiling_threads"], 2);
    ASSERT_EQ(j["ceiling_rounds_images_per_s"].size(), 3u);
    ASSERT_EQ(j["epoch_ratios"].size(), 2u);
    const auto& c = j["ceiling_rounds_images_per_s"];
    for (int e = 0; e < 2; ++e) {
      const double around = (c[e].get<double>() + c[e + 1].get<double>()) / 2;
      EXPECT_NEAR(j["epoch_ratios"][e].get<double>(),
                  j["epoch_images_per_s"][e].get<double>() / around, 1e-9);
    }
    EXPECT_GT(j["ceiling_per_core_images_per_s"].get<double>(), 0);  // one decoder, for reference
    EXPECT_EQ(j["bad_samples"], 0);
    // 4 slots, float: a window of max(prefetch 2, workers 2 + 1) batches, and the consumer's.
    EXPECT_EQ(j["slot_bytes"].get<uint64_t>(), 4u * 16 * 32 * 32 * 3 * 4);
    // One warm-up epoch by default, outside the figures: its rate is reported apart.
    EXPECT_EQ(j["warmup_epochs"], 1);
    ASSERT_EQ(j["warmup_images_per_s"].size(), 1u);
    EXPECT_GT(j["warmup_images_per_s"][0].get<double>(), 0);
  }
  {
    RunResult r =
        RunDdpio({"bench", "loader", "--data", dir.Sub("db"), "--workers", "1", "--batch-size",
                  "16", "--image-size", "32", "--epochs", "1", "--warmup-epochs", "0", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(LastLine(r.out));
    EXPECT_EQ(j["warmup_epochs"], 0);
    EXPECT_TRUE(j["warmup_images_per_s"].empty());
    EXPECT_EQ(j["slot_bytes"].get<uint64_t>(), 3u * 16 * 32 * 32 * 3);  // one worker: 2 + 1 slots
  }
  {
    RunResult r = RunDdpio({"bench", "loader", "--data", dir.Sub("db"), "--workers", "1",
                            "--batch-size", "16", "--image-size", "32", "--epochs", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("after 1 warm-up epoch(s), not in the figures"), std::string::npos)
        << r.out;
  }
  {
    // A corrupt record, skipped: counted and listed for the measured epochs only, the warm-up
    // epoch's apart. Helped samples are reported (how many depends on timing).
    ASSERT_OK(testing::WriteJpegDataset(dir.Sub("bad"), 20, 40, 5, /*corrupt=*/{3}));
    RunResult r =
        RunDdpio({"bench", "loader", "--data", dir.Sub("bad"), "--workers", "2", "--batch-size",
                  "8", "--image-size", "32", "--epochs", "2", "--bad-samples", "skip", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(LastLine(r.out));
    EXPECT_EQ(j["bad_samples"], 2);
    EXPECT_EQ(j["warmup_bad_samples"], 1);
    ASSERT_EQ(j["skipped"].size(), 2u);
    for (const auto& s : j["skipped"]) EXPECT_EQ(s["index"], 3);
    EXPECT_TRUE(j.contains("shared_samples"));
  }
  EXPECT_EQ(RunDdpio({"bench", "loader", "--data", dir.Sub("db"), "--crop-scale", "0.5"}).exit_code,
            2);
  EXPECT_EQ(
      RunDdpio({"bench", "loader", "--data", dir.Sub("db"), "--warmup-epochs", "-1"}).exit_code, 2);
  EXPECT_EQ(RunDdpio({"bench", "loader", "--data", dir.Sub("db"), "--decode", "slow"}).exit_code,
            2);
  EXPECT_EQ(RunDdpio({"bench", "loader", "--data", dir.Sub("missing")}).exit_code, 1);
}

TEST(CliLoader, BothHuffmanDecodersAreTimedOnTheSameImages) {
  testing::TempDir dir;
  ASSERT_NO_FATAL_FAILURE(MakeDataset(dir, "2", "6", "96"));
  RunResult r = RunDdpio({"bench", "decode", "--data", dir.Sub("db"), "--sample-images", "8",
                          "--rounds", "3", "--image-size", "32", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(LastLine(r.out));
  EXPECT_EQ(j["images"], 8);  // every record has restart markers
  std::vector<std::string> ways;
  for (const auto& w : j["ways"]) {
    ways.push_back(w["way"]);
    EXPECT_EQ(w["rounds_ms"].size(), 3u);
    EXPECT_GT(w["ms_per_image"].get<double>(), 0);
  }
  EXPECT_EQ(ways, (std::vector<std::string>{
                      "full, no markers, libjpeg", "full, markers, libjpeg", "full, markers, ddpio",
                      "1/8, no markers, libjpeg", "1/8, markers, libjpeg", "1/8, markers, ddpio",
                      "1/8, markers, ddpio 1 stream", "sample fast, libjpeg", "sample fast, ddpio",
                      "sample exact, libjpeg", "sample exact, ddpio"}));
  // The loader says which decoder it ran.
  for (std::string huffman : {"ddpio", "libjpeg"}) {
    RunResult l = RunDdpio({"bench", "loader", "--data", dir.Sub("db"), "--workers", "1",
                            "--batch-size", "4", "--image-size", "32", "--epochs", "1",
                            "--warmup-epochs", "0", "--huffman", huffman, "--json"});
    ASSERT_EQ(l.exit_code, 0) << l.err;
    auto lj = nlohmann::json::parse(LastLine(l.out));
    EXPECT_EQ(lj["huffman"], huffman);
    EXPECT_EQ(lj["segments_vs_whole_exact"]["differ"], 0);
  }
  EXPECT_EQ(RunDdpio({"bench", "loader", "--data", dir.Sub("db"), "--huffman", "fast"}).exit_code,
            2);
  // Without restart markers there is nothing to compare: said, exit 1.
  ASSERT_EQ(RunDdpio({"convert", "--src", dir.Sub("src"), "--out", dir.Sub("plain"),
                      "--restart-interval", "0", "--quiet"})
                .exit_code,
            0);
  RunResult plain = RunDdpio({"bench", "decode", "--data", dir.Sub("plain")});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("no restart-marked JPEG records"), std::string::npos) << plain.err;
  EXPECT_EQ(RunDdpio({"bench", "decode", "--data", dir.Sub("db"), "--rounds", "0"}).exit_code, 2);
}

}  // namespace
}  // namespace ddpio
