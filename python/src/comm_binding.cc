// ddpio._ddpio.discover_rank: this process's place in the job, found the way the C++ tools find
// it (torchrun, Slurm, Open MPI variables; comm/rank_info.h).
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "ddpio/comm/rank_info.h"
#include "status.h"

namespace ddpio::python {

namespace py = pybind11;

void BindComm(py::module_& m) {
  m.def(
      "discover_rank",
      [] {
        comm::RankInfo info = ValueOrThrow(comm::DiscoverRank(comm::CurrentEnvironment()));
        py::dict d;
        d["rank"] = info.rank;
        d["world_size"] = info.world_size;
        d["local_rank"] = info.local_rank;
        d["local_world_size"] = info.local_world_size;
        d["master_addr"] = info.master_addr;
        d["master_port"] = info.master_port;
        d["agent_store"] = info.agent_store;
        d["source"] = comm::RankSourceName(info.source);
        return d;
      },
      "This process's rank, world size and rendezvous, from the launcher's environment "
      "(torchrun, Slurm, Open MPI; a single process otherwise).");
}

}  // namespace ddpio::python
