// Running `ddpio` ranks under torchrun's elastic agent (torch.distributed.run), as users run
// elastic jobs, and reading back what each rank printed. Header-only; for tests built with
// DDPIO_TORCH_PYTHON (a Python with torch).
#ifndef DDPIO_TESTS_SUPPORT_TORCHRUN_H_
#define DDPIO_TESTS_SUPPORT_TORCHRUN_H_

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"
#include "tests/support/subprocess.h"

namespace ddpio::testing {

// Each rank's JSON line from torchrun's output ("[default<r>]:{...}" with --tee 1).
inline std::map<int, nlohmann::json> TorchrunLines(const std::string& out) {
  std::map<int, nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const size_t open = line.find("[default"), colon = line.find("]:{");
    if (open != 0 || colon == std::string::npos) continue;
    auto j = nlohmann::json::parse(line.substr(colon + 2), nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) lines[std::stoi(line.substr(8, colon - 8))] = j;
  }
  return lines;
}

// Writes the fault at `path`: a /bin/sh wrapper that runs its arguments and, on the agent's first
// attempt, kills local rank 1 with SIGKILL as soon as the file named by $KILL_AFTER exists
// (printing "killed rank 1" to stderr).
inline void WriteKillRankOneOnceScript(const std::string& path) {
  std::ofstream f(path);
  f << "#!/bin/sh\n"
       "\"$@\" & pid=$!\n"
       "if [ \"${TORCHELASTIC_RESTART_COUNT:-0}\" = 0 ] && [ \"$LOCAL_RANK\" = 1 ]; then\n"
       "  while [ ! -e \"$KILL_AFTER\" ] && kill -0 \"$pid\" 2>/dev/null; do sleep 0.01; done\n"
       "  kill -9 \"$pid\" 2>/dev/null && echo \"killed rank 1\" >&2\n"
       "fi\n"
       "wait \"$pid\"\n";
}

// torchrun's elastic agent on one node (rendezvous backend c10d on a free loopback port,
// --max_restarts 1, each rank's output teed with its prefix), running `program` on `nproc`
// workers; `fault`, if not empty, is a wrapper script run in front of the program.
inline std::vector<std::string> TorchrunElastic(const std::string& python, int nproc,
                                                const std::string& fault,
                                                const std::vector<std::string>& program) {
  std::vector<std::string> args = {python,
                                   "-m",
                                   "torch.distributed.run",
                                   "--no_python",
                                   "--nnodes",
                                   "1",
                                   "--nproc_per_node",
                                   std::to_string(nproc),
                                   "--rdzv_backend",
                                   "c10d",
                                   "--rdzv_endpoint",
                                   absl::StrCat("127.0.0.1:", FreeLoopbackPort()),
                                   "--max_restarts",
                                   "1",
                                   "--redirects",
                                   "1",
                                   "--tee",
                                   "1"};
  if (!fault.empty()) args.insert(args.end(), {"/bin/sh", fault});
  args.insert(args.end(), program.begin(), program.end());
  return args;
}

// Checks a run that WriteKillRankOneOnceScript struck against the same run uninterrupted: both
// ended well, the fault struck, the agent's restart resumed from a checkpoint (fewer steps than
// the whole run) and each of the `nproc` ranks ended with the straight run's parameters. Returns
// each rank's result line: the straight run's, then the struck run's.
inline std::pair<std::map<int, nlohmann::json>, std::map<int, nlohmann::json>>
ExpectResumedToTheStraightRun(const RunResult& straight, const RunResult& killed, int nproc) {
  EXPECT_EQ(straight.exit_code, 0) << straight.err;
  EXPECT_EQ(killed.exit_code, 0) << killed.err;
  EXPECT_NE(killed.err.find("killed rank 1"), std::string::npos) << killed.err;
  EXPECT_NE(killed.err.find("resuming from"), std::string::npos) << killed.err;
  auto want = TorchrunLines(straight.out), got = TorchrunLines(killed.out);
  EXPECT_EQ(want.size(), static_cast<size_t>(nproc)) << straight.out;
  EXPECT_EQ(got.size(), static_cast<size_t>(nproc)) << killed.out;
  if (want.size() != static_cast<size_t>(nproc) || got.size() != want.size()) return {};
  for (int rank = 0; rank < nproc; ++rank) {
    EXPECT_EQ(got.at(rank)["param_checksum"], want.at(rank)["param_checksum"]) << "rank " << rank;
  }
  EXPECT_LT(got.at(0)["steps"].get<uint64_t>(), want.at(0)["steps"].get<uint64_t>())
      << "the restarted job did not resume from its checkpoint";
  return {std::move(want), std::move(got)};
}

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_TORCHRUN_H_
