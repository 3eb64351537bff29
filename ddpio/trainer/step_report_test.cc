#include "ddpio/trainer/step_report.h"

#include <fstream>
#include <sstream>

#include "ddpio/comm/communicator_conformance.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::trainer {
namespace {

// A rank's interval of `steps` identical steps, in ms per step.
RankSteps Steps(int rank, int node, int leader, double wait, double compute, double allreduce,
                double read = 0, double decode = 0, double relay = 0, uint64_t steps = 10) {
  StepProfiler p(rank, node, leader);
  broadcast::FeederCounters c;
  for (uint64_t i = 0; i < steps; ++i) {
    c.read_ns += static_cast<uint64_t>(read * 1e6);
    c.decode_ns += static_cast<uint64_t>(decode * 1e6);
    c.network_wait_ns += static_cast<uint64_t>(relay * 1e6);
    p.AddStep(wait / 1e3, compute / 1e3, allreduce / 1e3, c);
  }
  return p.Take();
}

TEST(StepProfiler, StagesArePerStepDeltasWithSharesAndQuantiles) {
  StepProfiler p(3, 1, 2);
  broadcast::FeederCounters c;
  c.read_ns = 500'000'000;  // before the first step: the pipeline's earlier work counts once
  for (int i = 1; i <= 100; ++i) {
    c.read_ns += 2'000'000;                             // 2 ms a step
    c.decode_ns += static_cast<uint64_t>(i) * 100'000;  // 0.1 .. 10 ms
    p.AddStep(i == 100 ? 0.5 : 0.001, 0.004, 0.005, c);
  }
  EXPECT_EQ(p.steps(), 100u);
  const RankSteps r = p.Take();
  EXPECT_EQ(p.steps(), 0u);  // a new interval
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.node, 1);
  EXPECT_EQ(r.leader, 2);
  EXPECT_EQ(r.steps, 100u);
  EXPECT_NEAR(r.step_s, 99 * 0.001 + 0.5 + 100 * 0.009, 1e-9);
  EXPECT_NEAR(r.at(Stage::kWait).p50_ms, 1.0, 1e-9);
  EXPECT_NEAR(r.at(Stage::kWait).p99_ms, 1.0, 1e-9);  // 99 of 100 steps waited 1 ms
  EXPECT_NEAR(r.at(Stage::kDecode).p50_ms, 5.0, 1e-9);
  EXPECT_NEAR(r.at(Stage::kDecode).p99_ms, 9.9, 1e-9);
  // The first step carries what the counters held before it.
  EXPECT_NEAR(r.at(Stage::kRead).total_s, 0.5 + 0.2, 1e-9);
  EXPECT_NEAR(r.share(Stage::kCompute), 0.4 / r.step_s, 1e-9);
  EXPECT_NEAR(r.own_ms(), (99 * 0.001 + 0.5 + 0.4) * 1e3 / 100, 1e-9);
  // Counters that start again (a new pipeline) never give negative times.
  c = {};
  p.AddStep(0.001, 0.001, 0.001, c);
  EXPECT_EQ(p.Take().at(Stage::kRead).total_s, 0);
}

TEST(StepReport, BalancedRanksNameNobody) {
  std::vector<RankSteps> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(Steps(r, r / 2, -1, 2 + 0.1 * r, 10, 1, 3, 8));
  const StepReport report = Analyze(ranks, 1, 10, 20);
  EXPECT_EQ(report.straggler, -1);
  EXPECT_EQ(report.bottleneck, "compute");
  EXPECT_EQ(report.line.rfind("no straggler", 0), 0u) << report.line;
}

TEST(StepReport, APeerStarvedByItsLeaderNamesBothAndTheLeadersStage) {
  // Group [4, 5] on node 2: the leader reads slowly; its peer waits for batches; everyone else
  // waits in the all-reduce.
  std::vector<RankSteps> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(Steps(r, r / 2, r % 2 ? r - 1 : -1, 1, 10, 40));
  ranks.push_back(Steps(4, 2, -1, 5, 10, 30, /*read=*/61, /*decode=*/12, /*relay=*/3));
  ranks.push_back(Steps(5, 2, 4, 38, 10, 2));
  const StepReport report = Analyze(ranks, 0, 0, 10);
  EXPECT_EQ(report.straggler, 5);
  EXPECT_EQ(report.bottleneck, "wait");
  EXPECT_NE(report.line.find("rank 5 (node 2): 76% of its step waiting for batches from leader "
                             "rank 4; rank 4 (node 2): storage read p99 61 ms"),
            std::string::npos)
      << report.line;
}

TEST(StepReport, ARankReadingForItselfNamesItsOwnSlowestDataStage) {
  std::vector<RankSteps> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(Steps(r, r, -1, 1, 10, 30));
  ranks.push_back(Steps(3, 3, -1, 30, 10, 1, /*read=*/2, /*decode=*/45));
  const StepReport report = Analyze(ranks, 0, 0, 10);
  EXPECT_EQ(report.straggler, 3);
  EXPECT_NE(report.line.find("rank 3 (node 3): 73% of its step waiting for its batches"),
            std::string::npos)
      << report.line;
  EXPECT_NE(report.line.find("decode p99 45 ms"), std::string::npos) << report.line;
}

TEST(StepReport, ASlowComputerIsNamedForCompute) {
  std::vector<RankSteps> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(Steps(r, 0, -1, 1, 10, 25));
  ranks.push_back(Steps(3, 1, -1, 1, 35, 0.5));
  const StepReport report = Analyze(ranks, 0, 0, 10);
  EXPECT_EQ(report.straggler, 3);
  EXPECT_EQ(report.bottleneck, "compute");
  EXPECT_NE(report.line.find("rank 3 (node 1): computes 35.0 ms per step (p99 35 ms), 3.5x the "
                             "ranks' median of 10.0 ms"),
            std::string::npos)
      << report.line;
}

TEST(StepReport, PrometheusTextHasEveryRankAndStage) {
  std::vector<RankSteps> ranks = {Steps(0, 0, -1, 1, 10, 2), Steps(1, 0, 0, 9, 10, 1)};
  const StepReport report = Analyze(ranks, 0, 0, 10);
  const std::string text = StepReportPrometheus(report);
  std::istringstream in(text);
  std::string line;
  int samples = 0, helps = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) ++helps;
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_EQ(line.rfind("ddpio_", 0), 0u) << line;
    EXPECT_NE(line.find(' '), std::string::npos) << line;
  }
  EXPECT_EQ(helps, 5);
  EXPECT_EQ(samples, 3 * 2 * kStages + 2 + 1);
  EXPECT_NE(text.find("ddpio_step_stage_share{rank=\"1\",node=\"0\",stage=\"wait\"} 0.45"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(absl::StrCat("ddpio_straggler_rank ", report.straggler)), std::string::npos);

  testing::TempDir dir;
  const std::string path = dir.Sub("ddpio.prom");
  ASSERT_OK(WriteMetricsFile(path, text));
  std::ifstream f(path);
  std::stringstream back;
  back << f.rdbuf();
  EXPECT_EQ(back.str(), text);
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  EXPECT_FALSE(WriteMetricsFile(dir.Sub("missing/ddpio.prom"), text).ok());
}

// Four real ranks over Gloo: each gets every rank's summary, in rank order.
TEST(StepReport, GatherGivesEveryRankEverySummaryInRankOrder) {
  comm::RendezvousOptions o;
  o.token = "steps";
  o.job_id = "step-report";
  o.backend = comm::BackendKind::kGloo;
  auto codes = comm::testing::RunJob(4, o, [](comm::Job& job) {
    const int rank = job.info().rank;
    const double wait = rank == 3 ? 20 : rank;  // rank 3 starves: the report names it
    const RankSteps mine = Steps(rank, rank / 2, rank % 2 ? rank - 1 : -1, wait, 10, 5, 2 * rank);
    auto all = GatherStepReport(job.world(), mine, std::chrono::seconds(20));
    if (!all.ok() || all->size() != 4) return 1;
    for (int r = 0; r < 4; ++r) {
      const RankSteps& s = (*all)[r];
      if (s.rank != r || s.node != r / 2 || s.leader != (r % 2 ? r - 1 : -1) || s.steps != 10)
        return 2;
      if (std::abs(s.at(Stage::kRead).p50_ms - 2 * r) > 1e-9) return 3;
    }
    return Analyze(*std::move(all), 0, 0, 10).straggler == 3 ? 0 : 4;
  });
  EXPECT_EQ(codes, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace ddpio::trainer
