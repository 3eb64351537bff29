// `ddpio train` (run under `ddpio launch`, torchrun, srun or mpirun, or alone as one rank): the
// bundled DDP trainer end to end. Every rank joins the job over Gloo, trains, and returns its own
// result: final training loss, validation accuracy (every validation sample counted once over
// all ranks), samples/s, the data-stall fraction, the parameter checksum (identical on every
// rank), its feeder counters and the matmul path it took. Rank 0 logs progress every N steps.
#ifndef DDPIO_TOOLS_TRAIN_H_
#define DDPIO_TOOLS_TRAIN_H_

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ddpio/trainer/trainer.h"

namespace ddpio::tools {

struct TrainCliOptions {
  trainer::TrainOptions train;
  std::string store;  // "" (TCP on rank 0) or "file:DIR"
  std::string advertise_addr;  // "" chooses (broadcast/advertise.h)
};

// This rank's result.
absl::StatusOr<nlohmann::json> RunTrain(const TrainCliOptions& options);
std::string TrainText(const nlohmann::json& result);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_TRAIN_H_
