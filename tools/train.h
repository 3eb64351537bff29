// `ddpio train` (run under `ddpio launch`, torchrun, srun or mpirun, or alone as one rank): the
// bundled DDP trainer end to end. Every rank joins the job over Gloo, trains, and returns its own
// result: final training loss, validation accuracy (every validation sample counted once over
// all ranks), samples/s, the data-stall fraction, the parameter checksum (identical on every
// rank), its feeder counters and the matmul path it took. Rank 0 logs progress every N steps.
#ifndef DDPIO_TOOLS_TRAIN_H_
#define DDPIO_TOOLS_TRAIN_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/comm/backend.h"
#include "ddpio/device/probe.h"
#include "ddpio/trainer/trainer.h"

namespace ddpio::tools {

struct TrainCliOptions {
  trainer::TrainOptions train;
  std::string store;           // "" (TCP on rank 0) or "file:DIR"
  std::string advertise_addr;  // "" chooses (comm/advertise.h)
  // --device (cpu, cuda) and --backend (gloo, nccl, auto) as given, "" when not: they decide
  // train.device together (ResolveTrainDevice).
  std::string device;
  std::string backend;
};

// Where the model lives: --device when given; else --backend's choice (nccl -> cuda, gloo ->
// cpu, auto -> cuda when a device is usable and the device model compiled in, else cpu); cpu by
// default. FailedPrecondition for nccl without a usable device (ChooseBackend's message),
// InvalidArgument when the two flags contradict each other.
absl::StatusOr<std::string> ResolveTrainDevice(const std::string& device,
                                               const std::string& backend,
                                               const device::DeviceInfo& probe,
                                               bool device_model_compiled);

// This rank's result.
absl::StatusOr<nlohmann::json> RunTrain(const TrainCliOptions& options);
std::string TrainText(const nlohmann::json& result);
// The straggler report as `--json`'s "step_report": per rank and per stage, and its reading.
nlohmann::json StepReportJson(const trainer::StepReport& report);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_TRAIN_H_
