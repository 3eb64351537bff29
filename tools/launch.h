// `ddpio launch`: start N local ranks the way torchrun does, watch them, stop them together.
//
// Each rank gets torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// GROUP_RANK, MASTER_ADDR, MASTER_PORT) plus DDPIO_STORE_TOKEN (the rendezvous store's per-job
// token, generated unless already set) and DDPIO_JOB_ID. Output lines are prefixed with
// "[rank R] " on the stream they came from. When a rank fails (non-zero exit or a signal), the
// others get SIGTERM, then SIGKILL after a grace period, and the launcher exits with the failed
// rank's code (128 + signal for a signal) after saying which rank failed and how. SIGINT /
// SIGTERM to the launcher stop every rank the same way (exit 130 / 143).
#ifndef DDPIO_TOOLS_LAUNCH_H_
#define DDPIO_TOOLS_LAUNCH_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::tools {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (single node only)
  std::chrono::seconds grace{5};
  std::vector<std::string> command;  // program and arguments
};

// Runs the job to completion; returns the launcher's exit code. InvalidArgument for
// inconsistent options (nothing is started then).
absl::StatusOr<int> Launch(const LaunchOptions& options);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_LAUNCH_H_
