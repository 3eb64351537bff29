// `ddpio launch`: start N local ranks the way torchrun does, watch them, stop them together.
//
// Each rank gets torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// GROUP_RANK, MASTER_ADDR, MASTER_PORT) plus DDPIO_STORE_TOKEN (the rendezvous store's per-job
// token, generated unless already set) and DDPIO_JOB_ID. Output lines are prefixed with
// "[rank R] " on the stream they came from. When a rank fails (non-zero exit or a signal), the
// others get SIGTERM, then SIGKILL after a grace period, and the launcher exits with the failed
// rank's code (128 + signal for a signal) after saying which rank failed and how. SIGINT /
// SIGTERM to the launcher stop every rank the same way (exit 130 / 143).
//
// With --nnodes > 1 the launchers meet before any rank starts: node 0's serves a short-lived
// store on the master port (its own token, derived from DDPIO_STORE_TOKEN, so no rank can take
// it for rank 0's), every node's launcher claims its --node-rank there and says what it was told
// (--nnodes, --nproc-per-node), node 0 compares and answers, then stops listening so that its
// rank 0 can serve the job's store on that port. A node rank claimed twice or nodes told
// different things end every launcher with InvalidArgument naming each node and what it said —
// before any rank, so before any Gloo mesh, exists; the ranks used to find out inside Gloo.
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
  // With nnodes > 1: how long a launcher waits for the others (node 0 for every node, the others
  // for node 0) before any rank starts. Nodes of a job often start minutes apart (queues, image
  // pulls); torchrun waits 600 s by default too.
  std::chrono::seconds join_timeout{600};
  std::vector<std::string> command;  // program and arguments
};

// Runs the job to completion; returns the launcher's exit code. InvalidArgument for
// inconsistent options, or nodes whose launchers disagree; DeadlineExceeded when the other nodes'
// launchers did not come within join_timeout (nothing is started then).
absl::StatusOr<int> Launch(const LaunchOptions& options);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_LAUNCH_H_
