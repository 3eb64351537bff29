// JoinJob: the job join every ddpio program shares (pipeline.h).
#include "ddpio/common/log.h"
#include "ddpio/pipeline/pipeline.h"

namespace ddpio {

absl::StatusOr<std::unique_ptr<comm::Job>> JoinJob(const comm::RankInfo& rank,
                                                   comm::RendezvousOptions rendezvous,
                                                   std::chrono::milliseconds timeout) {
  rendezvous.timeout = timeout;            // the rendezvous and leaving the job
  rendezvous.comm.gloo.timeout = timeout;  // the connections of either backend
  SetLogRank(rank.rank);  // every log line of this process names its rank from here on
  return comm::Job::Join(rank, std::move(rendezvous));
}

}  // namespace ddpio
