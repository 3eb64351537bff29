// The straggler report (ddpio/trainer/step_report.h) as a Python dict, for Loader.report().
#ifndef DDPIO_PYTHON_SRC_STEP_REPORT_BINDING_H_
#define DDPIO_PYTHON_SRC_STEP_REPORT_BINDING_H_

#include <pybind11/pybind11.h>

#include "ddpio/trainer/step_report.h"

namespace ddpio::python {

// {"epoch", "first_step", "last_step", "straggler" (rank or None), "bottleneck", "line",
//  "table", "ranks": [{"rank", "node", "fed_by", "steps", "step_ms", "own_ms",
//  "stages": {name: {"share", "p50_ms", "p99_ms"}}}]}. In Python the time between batches —
// the model's forward, backward and torch's all-reduce, which the loader cannot tell apart — is
// the stage "outside" (the trainer's "compute" and "allreduce" stay 0 and are left out).
pybind11::dict StepReportDict(const trainer::StepReport& report);

}  // namespace ddpio::python

#endif  // DDPIO_PYTHON_SRC_STEP_REPORT_BINDING_H_
