// Rank discovery: who am I, how many are we, and where is the rendezvous — from the environment
// the launcher left (torchrun, Slurm, Open MPI) or from explicit flags.
//
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
//              TORCHELASTIC_USE_AGENT_STORE (its agent already serves a store on MASTER_PORT)
//   Slurm      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE; master = the
//              first host of SLURM_JOB_NODELIST (compressed lists such as "gpu[03-05,09]" too)
//   Open MPI   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
//              OMPI_COMM_WORLD_LOCAL_SIZE
// MASTER_ADDR / MASTER_PORT, when set, apply whatever the launcher; an explicit address or port
// (RankFlags) wins over them. Counts from several sources must agree: a value that contradicts
// another source (say rank 2 given under RANK=3) → InvalidArgument naming both, as does a rank
// outside [0, world) or a malformed number.
// Pure function of its inputs; thread-safe.
#ifndef DDPIO_COMM_RANK_INFO_H_
#define DDPIO_COMM_RANK_INFO_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/common/environment.h"

namespace ddpio::comm {

// Who gave the rank: the caller that filled the RankInfo itself, nobody (a process started
// alone), explicit values (RankFlags), a launcher's environment, or torch.distributed's process
// group (the Python binding).
enum class RankSource {
  kCaller,
  kSingleProcess,
  kFlags,
  kTorchrun,
  kSlurm,
  kOpenMpi,
  kTorchDistributed
};

// The source as logs and messages print it: "" for kCaller, then "single process", "flags",
// "torchrun", "slurm", "openmpi", "torch.distributed".
std::string RankSourceName(RankSource source);

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;  // torchrun's agent serves a PyTorch TCPStore on master_port
  // Started by torchrun's elastic agent with a rendezvous backend (--rdzv_backend c10d): it
  // serves its workers no store (TORCHELASTIC_USE_AGENT_STORE is False), so rank 0 serves ddpio's
  // on master_port, with DDPIO_STORE_TOKEN shared by every node.
  bool torchrun_rendezvous = false;
  RankSource source = RankSource::kCaller;
};

// Values given on the command line; unset fields defer to the environment.
struct RankFlags {
  std::optional<int> rank, world_size, local_rank, local_world_size, master_port;
  std::optional<std::string> master_addr;
};

using ddpio::CurrentEnvironment;
using ddpio::Environment;
using ddpio::EnvValue;

absl::StatusOr<RankInfo> DiscoverRank(const Environment& env, const RankFlags& flags = {});

// The first host of a Slurm node list: "gpu[03-05,09],cpu1" -> "gpu03".
absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist);

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_RANK_INFO_H_
