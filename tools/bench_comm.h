// `ddpio bench comm` (run under `ddpio launch` or torchrun-style environments): collective
// bandwidth and latency through the Communicator, next to a ceiling measured in the same run —
// plain TCP throughput between ranks 0 and 1 over the same network path. Rank 0 reports.
#ifndef DDPIO_TOOLS_BENCH_COMM_H_
#define DDPIO_TOOLS_BENCH_COMM_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace ddpio::tools {

struct BenchCommOptions {
  std::string backend = "gloo";  // gloo, nccl or auto (comm/backend.h)
  uint64_t size = uint64_t{64} << 20;
  int repeat = 5;
  int group_size = 0;  // 0: the whole world
  std::string layout = "contiguous";
  std::string store;           // "" (TCP on rank 0) or "file:DIR"
  std::string advertise_addr;  // "" chooses (comm/advertise.h)
};

// The JSON result on rank 0; an empty object on other ranks.
absl::StatusOr<nlohmann::json> BenchComm(const BenchCommOptions& options);
std::string BenchCommText(const nlohmann::json& result);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_BENCH_COMM_H_
