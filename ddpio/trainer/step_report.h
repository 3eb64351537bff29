// The straggler report: where each rank's step time goes, per stage, gathered to rank 0 and read
// as one line naming the slowest rank and its bottleneck, e.g.
//
//   rank 5 (node 2): 38% of its step waiting for batches from leader rank 4; rank 4: storage
//   read p99 61 ms
//
// A rank measures each optimizer step (StepProfiler::AddStep): the time it waited for its
// batches, computed, and waited in the gradient all-reduce, and — from its pipeline's counters —
// the time its threads spent reading storage, decoding and in the group's sends and receives
// since the previous step. Every `report_every` steps and at each epoch's end the ranks gather
// their summaries (GatherStepReport: one AllGather on the world) and rank 0 reads them
// (Analyze). In data-parallel training every rank's step ends in the same all-reduce, so the
// ranks' step times are equal; what differs is the part before it — a rank's own time (waiting
// for data + computing). The straggler is the rank whose own time stands out from the median;
// the others' extra time shows up as waiting in the all-reduce.
#ifndef DDPIO_TRAINER_STEP_REPORT_H_
#define DDPIO_TRAINER_STEP_REPORT_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/feeder_options.h"
#include "ddpio/comm/communicator.h"

namespace ddpio::trainer {

// The stages of a step. kWait, kCompute and kAllReduce are on the training thread and add up
// to the step; kRead, kDecode and kRelay are the rank's data threads (summed over them), which
// overlap the step.
enum class Stage { kWait, kCompute, kAllReduce, kRead, kDecode, kRelay };
inline constexpr int kStages = 6;
std::string StageName(Stage stage);  // "wait", "compute", "allreduce", "read", "decode", "relay"

struct StageSummary {
  double total_s = 0;  // over the interval
  double p50_ms = 0;   // per step
  double p99_ms = 0;
};

// One rank's summary of an interval of steps.
struct RankSteps {
  int rank = 0;
  int node = 0;     // rank / ranks per node
  int leader = -1;  // the rank that feeds it (its group's leader), -1 when it reads for itself
  uint64_t steps = 0;
  double step_s = 0;  // wall time of the interval's steps
  std::array<StageSummary, kStages> stages;

  const StageSummary& at(Stage s) const { return stages[static_cast<int>(s)]; }
  double share(Stage s) const { return step_s > 0 ? at(s).total_s / step_s : 0; }
  // The rank's own time per step: waiting for data plus computing (not the all-reduce, which
  // waits for the slowest rank).
  double own_ms() const;
};

// Collects one rank's steps between reports. Not thread-safe: the training thread's.
class StepProfiler {
 public:
  StepProfiler(int rank, int node, int leader) : rank_(rank), node_(node), leader_(leader) {}
  // One optimizer step: its times on the training thread, and the pipeline's counters after it
  // (cumulative; the stage times are their increase since the previous step).
  void AddStep(double wait_s, double compute_s, double allreduce_s,
               const broadcast::FeederCounters& after);
  uint64_t steps() const { return wait_.size(); }
  // The summary of the steps since the last Take, which starts a new interval.
  RankSteps Take();

 private:
  const int rank_, node_, leader_;
  std::vector<double> wait_, compute_, allreduce_, read_, decode_, relay_;  // seconds per step
  bool have_last_ = false;
  uint64_t last_read_ns_ = 0, last_decode_ns_ = 0, last_relay_ns_ = 0;
};

// Every rank's summary, in rank order, on every rank (an AllGather on `world`, in memory the
// communicator can use). Collective: every rank calls it at the same step.
absl::StatusOr<std::vector<RankSteps>> GatherStepReport(comm::Communicator& world,
                                                        const RankSteps& mine,
                                                        std::chrono::milliseconds timeout);

struct StepReport {
  uint64_t epoch = 0;
  uint64_t first_step = 0, last_step = 0;  // optimizer steps covered (global numbering)
  std::vector<RankSteps> ranks;
  int straggler = -1;      // the rank named, or -1 when no rank stands out
  std::string line;        // the one-line reading (names nobody when balanced)
  std::string bottleneck;  // the straggler's stage ("wait", "compute"), or the common one
};

// A rank stands out when its own time exceeds the median of the ranks' by more than this
// fraction (and by at least 1 ms).
inline constexpr double kStragglerMargin = 0.25;

// Reads the gathered summaries: the straggler, its bottleneck and the line.
// `loop_only`: the ranks' steps are known only as the time waiting for batches and the rest
// (Python's Loader.report(): the rest — forward, backward, torch's all-reduce — is put in
// kAllReduce, kCompute is 0), and the line says "outside the loader" for the rest.
StepReport Analyze(std::vector<RankSteps> ranks, uint64_t epoch, uint64_t first_step,
                   uint64_t last_step, bool loop_only = false);

// The per-rank table for a log: one line per rank, every stage's share and p50/p99.
std::string StepReportTable(const StepReport& report);

// The report in Prometheus' text exposition format (node_exporter's textfile collector):
// ddpio_step_stage_share, ddpio_step_stage_p50_seconds, ddpio_step_stage_p99_seconds (labels
// rank, node, stage), ddpio_step_seconds (rank, node), ddpio_straggler_rank.
std::string StepReportPrometheus(const StepReport& report);

// Writes `text` to `path` atomically (a temporary file renamed over it), as the textfile
// collector requires.
absl::Status WriteMetricsFile(const std::string& path, const std::string& text);

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_STEP_REPORT_H_
