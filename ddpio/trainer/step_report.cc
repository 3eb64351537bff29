#include "ddpio/trainer/step_report.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::trainer {
namespace {

constexpr std::array<Stage, kStages> kAll = {Stage::kWait, Stage::kCompute, Stage::kAllReduce,
                                             Stage::kRead, Stage::kDecode,  Stage::kRelay};

// The q-quantile (nearest rank) of `v`, in ms.
double QuantileMs(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k] * 1e3;
}

StageSummary Summarize(const std::vector<double>& per_step) {
  StageSummary s;
  for (double x : per_step) s.total_s += x;
  s.p50_ms = QuantileMs(per_step, 0.50);
  s.p99_ms = QuantileMs(per_step, 0.99);
  return s;
}

// A summary travels as doubles: rank, node, leader, steps, step_s, then per stage total, p50, p99.
constexpr size_t kFields = 5 + 3 * kStages;

std::array<double, kFields> Pack(const RankSteps& r) {
  std::array<double, kFields> a{};
  a[0] = r.rank;
  a[1] = r.node;
  a[2] = r.leader;
  a[3] = static_cast<double>(r.steps);
  a[4] = r.step_s;
  for (int s = 0; s < kStages; ++s) {
    a[5 + 3 * s] = r.stages[s].total_s;
    a[6 + 3 * s] = r.stages[s].p50_ms;
    a[7 + 3 * s] = r.stages[s].p99_ms;
  }
  return a;
}

RankSteps Unpack(const double* a) {
  RankSteps r;
  r.rank = static_cast<int>(a[0]);
  r.node = static_cast<int>(a[1]);
  r.leader = static_cast<int>(a[2]);
  r.steps = static_cast<uint64_t>(a[3]);
  r.step_s = a[4];
  for (int s = 0; s < kStages; ++s) r.stages[s] = {a[5 + 3 * s], a[6 + 3 * s], a[7 + 3 * s]};
  return r;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Who(const RankSteps& r) {
  return absl::StrCat("rank ", r.rank, " (node ", r.node, ")");
}

// The data thread stage that costs a reading rank most per step: "storage read p99 61 ms".
std::string DataStage(const RankSteps& r) {
  Stage worst = Stage::kRead;
  for (Stage s : {Stage::kDecode, Stage::kRelay}) {
    if (r.at(s).total_s > r.at(worst).total_s) worst = s;
  }
  const char* name = worst == Stage::kRead     ? "storage read"
                     : worst == Stage::kDecode ? "decode"
                                               : "relay send/receive";
  return absl::StrFormat("%s p99 %.0f ms per step (%.0f%% of its step)", name, r.at(worst).p99_ms,
                         100 * r.share(worst));
}

}  // namespace

std::string StageName(Stage stage) {
  switch (stage) {
    case Stage::kWait:
      return "wait";
    case Stage::kCompute:
      return "compute";
    case Stage::kAllReduce:
      return "allreduce";
    case Stage::kRead:
      return "read";
    case Stage::kDecode:
      return "decode";
    case Stage::kRelay:
      return "relay";
  }
  return "?";
}

double RankSteps::own_ms() const {
  if (steps == 0) return 0;
  return (at(Stage::kWait).total_s + at(Stage::kCompute).total_s) * 1e3 / steps;
}

void StepProfiler::AddStep(double wait_s, double compute_s, double allreduce_s,
                           const broadcast::FeederCounters& after) {
  const uint64_t relay_ns = after.network_wait_ns;
  if (!have_last_) {  // the first step of a run: its data threads' time so far
    last_read_ns_ = last_decode_ns_ = last_relay_ns_ = 0;
    have_last_ = true;
  }
  const auto delta = [](uint64_t now, uint64_t* last) {
    const uint64_t d = now >= *last ? now - *last : 0;  // a new pipeline starts from 0
    *last = now;
    return d / 1e9;
  };
  wait_.push_back(wait_s);
  compute_.push_back(compute_s);
  allreduce_.push_back(allreduce_s);
  read_.push_back(delta(after.read_ns, &last_read_ns_));
  decode_.push_back(delta(after.decode_ns, &last_decode_ns_));
  relay_.push_back(delta(relay_ns, &last_relay_ns_));
}

RankSteps StepProfiler::Take() {
  RankSteps r;
  r.rank = rank_;
  r.node = node_;
  r.leader = leader_;
  r.steps = wait_.size();
  const std::array<std::vector<double>*, kStages> all = {&wait_, &compute_, &allreduce_,
                                                         &read_, &decode_,  &relay_};
  for (int s = 0; s < kStages; ++s) r.stages[s] = Summarize(*all[s]);
  r.step_s =
      r.at(Stage::kWait).total_s + r.at(Stage::kCompute).total_s + r.at(Stage::kAllReduce).total_s;
  for (auto* v : all) v->clear();
  return r;
}

absl::StatusOr<std::vector<RankSteps>> GatherStepReport(comm::Communicator& world,
                                                        const RankSteps& mine,
                                                        std::chrono::milliseconds timeout) {
  const std::array<double, kFields> packed = Pack(mine);
  const size_t bytes = sizeof(packed);
  const size_t n = static_cast<size_t>(world.size());
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> in, world.Allocate(bytes));
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> out, world.Allocate(bytes * n));
  DDPIO_RETURN_IF_ERROR(world.StageIn(in.get(), packed.data(), bytes));
  DDPIO_RETURN_IF_ERROR(world.AllGather(in.get(), out.get(), bytes, timeout));
  std::vector<double> all(kFields * n);
  DDPIO_RETURN_IF_ERROR(world.CopyOut(all.data(), out.get(), bytes * n, timeout));
  std::vector<RankSteps> ranks;
  ranks.reserve(n);
  for (size_t r = 0; r < n; ++r) ranks.push_back(Unpack(all.data() + r * kFields));
  return ranks;
}

StepReport Analyze(std::vector<RankSteps> ranks, uint64_t epoch, uint64_t first_step,
                   uint64_t last_step, bool loop_only) {
  StepReport report;
  report.epoch = epoch;
  report.first_step = first_step;
  report.last_step = last_step;
  report.ranks = std::move(ranks);
  if (report.ranks.empty()) return report;
  std::vector<double> own;
  for (const RankSteps& r : report.ranks) own.push_back(r.own_ms());
  const double median = Median(own);
  const auto slowest = std::max_element(own.begin(), own.end()) - own.begin();
  const RankSteps& s = report.ranks[slowest];
  const bool stands_out =
      own[slowest] > median * (1 + kStragglerMargin) && own[slowest] - median >= 1.0;
  if (!stands_out) {
    // Nobody to name: say what the job as a whole spends its steps on.
    double wait = 0, compute = 0, allreduce = 0;
    for (const RankSteps& r : report.ranks) {
      wait += r.share(Stage::kWait);
      compute += r.share(Stage::kCompute);
      allreduce += r.share(Stage::kAllReduce);
    }
    const double n = static_cast<double>(report.ranks.size());
    report.bottleneck = wait >= compute && wait >= allreduce ? "wait"
                        : compute >= allreduce               ? "compute"
                                                             : "allreduce";
    const std::string spent =
        loop_only ? absl::StrFormat("%.0f%% outside the loader (forward, backward, all-reduce)",
                                    100 * allreduce / n)
                  : absl::StrFormat("%.0f%% computing, %.0f%% in the all-reduce", 100 * compute / n,
                                    100 * allreduce / n);
    if (loop_only && report.bottleneck == "allreduce") report.bottleneck = "outside";
    report.line = absl::StrFormat(
        "no straggler: every rank's own step time is within %.0f%% of the median (%.1f ms; "
        "slowest %s at %.1f ms); the ranks spend %.0f%% of a step waiting for batches, %s",
        100 * kStragglerMargin, median, Who(s), own[slowest], 100 * wait / n, spent);
    return report;
  }
  report.straggler = s.rank;
  const double others_allreduce = [&] {
    std::vector<double> v;
    for (const RankSteps& r : report.ranks) {
      if (r.rank != s.rank) v.push_back(r.share(Stage::kAllReduce));
    }
    return Median(v);
  }();
  const std::string tail = absl::StrFormat(
      " (its own time %.1f ms per step against a median of %.1f ms; the other ranks %s %.0f%% "
      "of their step %s)",
      own[slowest], median, loop_only ? "spend" : "wait", 100 * others_allreduce,
      loop_only ? "outside the loader" : "in the all-reduce");
  if (s.at(Stage::kWait).total_s >= s.at(Stage::kCompute).total_s) {
    report.bottleneck = "wait";
    const auto leader = std::find_if(report.ranks.begin(), report.ranks.end(),
                                     [&](const RankSteps& r) { return r.rank == s.leader; });
    if (s.leader >= 0 && s.leader != s.rank && leader != report.ranks.end()) {
      report.line = absl::StrFormat(
          "%s: %.0f%% of its step waiting for batches from leader rank %d; %s: %s%s", Who(s),
          100 * s.share(Stage::kWait), s.leader, Who(*leader), DataStage(*leader), tail);
    } else {
      report.line = absl::StrFormat(
          "%s: %.0f%% of its step waiting for its batches (wait p99 %.0f ms); %s%s", Who(s),
          100 * s.share(Stage::kWait), s.at(Stage::kWait).p99_ms, DataStage(s), tail);
    }
  } else {
    report.bottleneck = "compute";
    std::vector<double> compute;
    for (const RankSteps& r : report.ranks)
      compute.push_back(r.steps > 0 ? r.at(Stage::kCompute).total_s * 1e3 / r.steps : 0);
    const double mine = compute[slowest], typical = Median(compute);
    report.line = absl::StrFormat(
        "%s: computes %.1f ms per step (p99 %.0f ms), %.1fx the ranks' median of %.1f ms%s", Who(s),
        mine, s.at(Stage::kCompute).p99_ms, typical > 0 ? mine / typical : 0.0, typical, tail);
  }
  return report;
}

std::string StepReportTable(const StepReport& report) {
  std::string out = absl::StrFormat("step report, epoch %d, steps %d-%d: %s\n", report.epoch,
                                    report.first_step, report.last_step, report.line);
  for (const RankSteps& r : report.ranks) {
    absl::StrAppendFormat(&out, "  rank %d node %d: %d steps, %.1f ms/step, own %.1f ms |", r.rank,
                          r.node, r.steps, r.steps > 0 ? r.step_s * 1e3 / r.steps : 0.0,
                          r.own_ms());
    for (Stage st : kAll) {
      absl::StrAppendFormat(&out, " %s %.0f%% p50 %.1f p99 %.1f ms |", StageName(st),
                            100 * r.share(st), r.at(st).p50_ms, r.at(st).p99_ms);
    }
    out.back() = '\n';
  }
  return out;
}

std::string StepReportPrometheus(const StepReport& report) {
  std::string out;
  const auto family = [&](const char* name, const char* help) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " gauge\n");
  };
  const auto labels = [](const RankSteps& r, Stage st) {
    return absl::StrFormat("{rank=\"%d\",node=\"%d\",stage=\"%s\"}", r.rank, r.node, StageName(st));
  };
  family("ddpio_step_stage_share",
         "Share of the step's wall time spent in the stage (data stages: summed over threads)");
  for (const RankSteps& r : report.ranks) {
    for (Stage st : kAll)
      absl::StrAppendFormat(&out, "ddpio_step_stage_share%s %.6g\n", labels(r, st), r.share(st));
  }
  family("ddpio_step_stage_p50_seconds", "Median per-step time of the stage");
  for (const RankSteps& r : report.ranks) {
    for (Stage st : kAll)
      absl::StrAppendFormat(&out, "ddpio_step_stage_p50_seconds%s %.6g\n", labels(r, st),
                            r.at(st).p50_ms / 1e3);
  }
  family("ddpio_step_stage_p99_seconds", "99th percentile per-step time of the stage");
  for (const RankSteps& r : report.ranks) {
    for (Stage st : kAll)
      absl::StrAppendFormat(&out, "ddpio_step_stage_p99_seconds%s %.6g\n", labels(r, st),
                            r.at(st).p99_ms / 1e3);
  }
  family("ddpio_step_seconds", "Mean wall time of a step over the report's interval");
  for (const RankSteps& r : report.ranks) {
    absl::StrAppendFormat(&out, "ddpio_step_seconds{rank=\"%d\",node=\"%d\"} %.6g\n", r.rank,
                          r.node, r.steps > 0 ? r.step_s / r.steps : 0.0);
  }
  family("ddpio_straggler_rank", "The rank the report names as the straggler, -1 for none");
  absl::StrAppendFormat(&out, "ddpio_straggler_rank %d\n", report.straggler);
  return out;
}

absl::Status WriteMetricsFile(const std::string& path, const std::string& text) {
  return WriteFileAtomically(path, text);
}

}  // namespace ddpio::trainer
