// `ddpio sampler` and `ddpio bench sampler` as users run them.
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace ddpio {
namespace {

using testing::LastLine;
using testing::RunDdpio;
using testing::RunResult;

nlohmann::json Json(const std::vector<std::string>& args) {
  RunResult r = RunDdpio(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(LastLine(r.out), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST(CliSampler, AnswersLikeTorchForTheReferenceVectors) {
  std::ifstream in(DDPIO_TORCH_VECTORS);
  nlohmann::json doc = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    if (c["size"] != 1000 || c["world"] != 8) continue;  // a sample of the cases, as processes
    std::vector<std::string> args = {"sampler",
                                     "--size",
                                     "1000",
                                     "--world",
                                     "8",
                                     "--rank",
                                     std::to_string(c["rank"].get<int>()),
                                     "--seed",
                                     std::to_string(c["seed"].get<int>()),
                                     "--epoch",
                                     std::to_string(c["epoch"].get<int>()),
                                     "--json"};
    if (!c["shuffle"].get<bool>()) args.push_back("--no-shuffle");
    if (c["drop_last"].get<bool>()) {
      args.push_back("--padding");
      args.push_back("drop");
    }
    nlohmann::json j = Json(args);
    ASSERT_EQ(j["count"], c["count"]) << c.dump();
    auto want = c["indices"].get<std::vector<uint64_t>>();
    auto got = j["indices"].get<std::vector<uint64_t>>();
    ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << c.dump();
    ++checked;
  }
  EXPECT_EQ(checked, 64);
}

TEST(CliSampler, MaskBatchesAndElasticContinuation) {
  nlohmann::json m = Json(
      {"sampler", "--size", "10", "--world", "4", "--rank", "3", "--padding", "mask", "--json"});
  EXPECT_EQ(m["count"], 3);
  EXPECT_EQ(m["padded"], nlohmann::json::array({2}));  // 12 slots for 10 samples: rank 3's last
  nlohmann::json b = Json(
      {"sampler", "--size", "23", "--world", "4", "--rank", "1", "--batch-size", "4", "--json"});
  ASSERT_EQ(b["batches"].size(), 2u);
  EXPECT_EQ(b["batches"][1].size(), 2u);  // 6 samples: 4 + 2
  // Elastic: 8 ranks consumed 400 of 1000; 3 new ranks deal the other 600 exactly once.
  std::set<uint64_t> seen;
  nlohmann::json full = Json(
      {"sampler", "--size", "1000", "--world", "1", "--rank", "0", "--padding", "none", "--json"});
  for (int r = 0; r < 3; ++r) {
    nlohmann::json e =
        Json({"sampler", "--size", "1000", "--world", "8", "--rank", std::to_string(r),
              "--consumed", "400", "--new-world", "3", "--padding", "none", "--json"});
    EXPECT_EQ(e["world"], 3);
    EXPECT_EQ(e["start"], 400);
    for (uint64_t v : e["indices"].get<std::vector<uint64_t>>()) EXPECT_TRUE(seen.insert(v).second);
  }
  EXPECT_EQ(seen.size(), 600u);
  auto order = full["indices"].get<std::vector<uint64_t>>();
  for (size_t i = 400; i < 1000; ++i) EXPECT_EQ(seen.count(order[i]), 1u);
}

// The block order's elastic continuation keeps the lanes the epoch was dealt to: what 4 ranks
// consumed plus what 3 new ranks get is every sample once; its quality is measured beside exact.
TEST(CliSampler, BlockOrderElasticContinuationAndQuality) {
  const std::vector<std::string> block = {"--order",   "block",          "--block-chunk",
                                          "16",        "--block-window", "3",
                                          "--padding", "none",           "--json"};
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"sampler", "--size", "1000"});
    args.insert(args.end(), block.begin(), block.end());
    return Json(args);
  };
  std::multiset<uint64_t> seen;
  for (int r = 0; r < 4; ++r) {
    nlohmann::json first = run({"--world", "4", "--rank", std::to_string(r)});
    EXPECT_EQ(first["order"], "block");
    const auto indices = first["indices"].get<std::vector<uint64_t>>();
    seen.insert(indices.begin(), indices.begin() + 100);  // 100 steps on 4 ranks: 400 consumed
  }
  for (int r = 0; r < 3; ++r) {
    nlohmann::json e =
        run({"--world", "4", "--rank", std::to_string(r), "--consumed", "400", "--new-world", "3"});
    for (uint64_t v : e["indices"].get<std::vector<uint64_t>>()) seen.insert(v);
  }
  ASSERT_EQ(seen.size(), 1000u);
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
  nlohmann::json q = Json({"sampler", "--size", "1000", "--world", "4", "--order", "block",
                           "--quality", "10", "--batch-size", "16", "--json"});
  EXPECT_LT(q["block"]["distinct_classes"].get<double>(),
            q["exact"]["distinct_classes"].get<double>());
  EXPECT_EQ(RunDdpio({"sampler", "--size", "10", "--world", "4"}).exit_code, 2) << "--rank needed";
}

TEST(CliSampler, UsageErrors) {
  EXPECT_EQ(RunDdpio({"sampler", "--size", "10", "--world", "4", "--rank", "4"}).exit_code, 2);
  EXPECT_EQ(RunDdpio({"sampler", "--size", "10", "--world", "0", "--rank", "0"}).exit_code, 2);
  EXPECT_EQ(RunDdpio({"sampler", "--size", "10", "--world", "2", "--rank", "0", "--padding", "x"})
                .exit_code,
            2);
  EXPECT_EQ(RunDdpio({"sampler", "--world", "2", "--rank", "0"}).exit_code, 2);
  RunResult past =
      RunDdpio({"sampler", "--size", "10", "--world", "2", "--rank", "0", "--consumed", "11"});
  EXPECT_EQ(past.exit_code, 0) << past.err;  // capped at the dataset size: nothing left
  EXPECT_NE(past.out.find("0 samples"), std::string::npos) << past.out;
}

TEST(CliSampler, BenchReportsItsFigures) {
  nlohmann::json j = Json({"bench", "sampler", "--size", "100000", "--world", "8", "--repeat", "3",
                           "--no-torch", "--json"});
  EXPECT_EQ(j["count"], 12500);
  EXPECT_GT(j["median_ms"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["permutation_bytes_per_sample"].get<double>(), 4.0);
}

}  // namespace
}  // namespace ddpio
