#include "step_report_binding.h"

#include <string>

namespace ddpio::python {

namespace py = pybind11;

py::dict StepReportDict(const trainer::StepReport& report) {
  py::list ranks;
  for (const trainer::RankSteps& r : report.ranks) {
    py::dict stages;
    for (int s = 0; s < trainer::kStages; ++s) {
      const auto stage = static_cast<trainer::Stage>(s);
      if (stage == trainer::Stage::kCompute) continue;
      const std::string name =
          stage == trainer::Stage::kAllReduce ? "outside" : trainer::StageName(stage);
      py::dict d;
      d["share"] = r.share(stage);
      d["p50_ms"] = r.at(stage).p50_ms;
      d["p99_ms"] = r.at(stage).p99_ms;
      stages[py::str(name)] = d;
    }
    py::dict d;
    d["rank"] = r.rank;
    d["node"] = r.node;
    d["fed_by"] = r.leader >= 0 ? py::object(py::int_(r.leader)) : py::object(py::none());
    d["steps"] = r.steps;
    d["step_ms"] = r.steps > 0 ? r.step_s * 1e3 / static_cast<double>(r.steps) : 0.0;
    d["own_ms"] = r.own_ms();
    d["stages"] = stages;
    ranks.append(d);
  }
  py::dict out;
  out["epoch"] = report.epoch;
  out["first_step"] = report.first_step;
  out["last_step"] = report.last_step;
  out["straggler"] =
      report.straggler >= 0 ? py::object(py::int_(report.straggler)) : py::object(py::none());
  out["bottleneck"] = report.bottleneck == "allreduce" ? std::string("outside") : report.bottleneck;
  out["line"] = report.line;
  out["table"] = trainer::StepReportTable(report);
  out["ranks"] = ranks;
  return out;
}

}  // namespace ddpio::python
