// Joining a job: rank 0 serves the TCP store at MASTER_ADDR:MASTER_PORT (or everyone uses a
// file store on a shared directory), every rank connects, the world communicator is built, and
// group communicators are created in the same order on every rank.
//
// Keys live under "job/<DDPIO_JOB_ID>/" so a long-lived store or a reused file-store directory
// never mixes two runs. Rank 0 keeps its store server alive until every rank has left the job
// (each rank's Job destructor counts itself out), so a slow rank never loses the store halfway
// through a rendezvous. Join leaves the rank printed on every log line to its caller
// (SetLogRank, common/log.h), which owns that process-wide setting.
#ifndef DDPIO_COMM_RENDEZVOUS_H_
#define DDPIO_COMM_RENDEZVOUS_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/comm/advertise.h"
#include "ddpio/comm/backend.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/comm/group_layout.h"
#include "ddpio/comm/liveness.h"
#include "ddpio/comm/rank_info.h"
#include "ddpio/comm/store.h"

namespace ddpio::comm {

struct RendezvousOptions {
  // "" (default): the TCP store hosted by rank 0; "file:DIR": a FileStore in DIR.
  std::string store;
  // A store the caller already shares with every rank (e.g. torch.distributed's, reached through
  // Python): used instead of `store`, under the job's prefix; `external_store_name` says what it
  // is in the log.
  std::shared_ptr<Store> external_store;
  std::string external_store_name;
  // With external_store: the PyTorch TCPStore behind it (host, port), reached directly for the
  // heartbeats and the census (liveness.h) — no Python in their thread. Empty: no heartbeats.
  std::string heartbeat_store_host;
  int heartbeat_store_port = 0;
  // Every wait of the rendezvous and of leaving the job (the store's replies included). Commands
  // pass their --timeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // gloo, nccl or auto (NCCL when a CUDA device is usable; see backend.h). The choice is made
  // once, logged, and used for the world and every group.
  BackendKind backend = BackendKind::kAuto;
  // comm.gloo.timeout is the connect timeout of either backend; comm.local_rank is taken from
  // the RankInfo.
  CommOptions comm;
  // DDPIO_STORE_TOKEN / DDPIO_JOB_ID (from the environment unless set here).
  std::string token;
  std::string job_id;
  // The address this rank's connections are reached on (`--advertise-addr`); "" chooses one as
  // advertise.h says (DDPIO_ADVERTISE_ADDR, GLOO_SOCKET_IFNAME, the route to MASTER_ADDR). It
  // replaces comm.gloo.hostname.
  std::string advertise_addr;
};

class TcpStoreServer;

class Job {
 public:
  // InvalidArgument without a token for the TCP store or with an advertise address that is not
  // this host's; errors of the address choice (advertise.h), the store and the mesh otherwise.
  // The environment supplies DDPIO_STORE_TOKEN, DDPIO_JOB_ID, DDPIO_ADVERTISE_ADDR,
  // GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME and, under torchrun, TORCHELASTIC_RUN_ID,
  // TORCHELASTIC_RESTART_COUNT and DDPIO_TORCH_STORE_PROTOCOL; the first overload reads this
  // process's.
  static absl::StatusOr<std::unique_ptr<Job>> Join(const RankInfo& info, RendezvousOptions options);
  static absl::StatusOr<std::unique_ptr<Job>> Join(const RankInfo& info, RendezvousOptions options,
                                                   const Environment& env);
  ~Job();

  const RankInfo& info() const { return info_; }
  Communicator& world() { return *world_; }
  std::shared_ptr<Store> store() { return store_; }
  const BackendChoice& backend() const { return backend_; }
  // The address (and interface) this rank advertises to its peers, and why.
  const AdvertiseAddress& advertise() const { return advertise_; }

  // This rank is leaving because of an error: its destructor does not count itself out on the
  // store (which may be what froze), and rank 0 waits for the others to leave for at most 2 s
  // instead of the job's timeout (they are failing too, or gone).
  void MarkFailed() { failed_ = true; }

  // After a failure: which ranks of the job stopped answering (liveness.h), to name the peer
  // that vanished. Takes up to ~2.5 heartbeat periods (a twentieth of the job's timeout each).
  Census TakeCensus();
  // `failure` of this job's work, with the census's finding appended when it is a lost
  // connection or a timeout (Unavailable, DeadlineExceeded, Aborted): which ranks vanished.
  absl::Status WithCensus(const absl::Status& failure);

  // This rank's group communicator in `layout` (ranks are local ranks within the group), on the
  // job's backend or, with `host_memory`, on Gloo whatever the job's backend (what moves host
  // memory: encoded records). Every rank must call it with the same arguments in the same order.
  absl::StatusOr<std::unique_ptr<Communicator>> Group(const GroupLayout& layout,
                                                      bool host_memory = false);

 private:
  Job() = default;
  RankInfo info_;
  RendezvousOptions options_;
  BackendChoice backend_;
  AdvertiseAddress advertise_;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Communicator> world_;
  std::unique_ptr<Heartbeat> heartbeat_;  // null with an external store
  int groups_created_ = 0;
  bool failed_ = false;
};

// Marks the job failed when it leaves scope before Succeeded(): how a command says "leaving
// because of an error" on every early return. Declare it right after the Job.
class LeaveGuard {
 public:
  explicit LeaveGuard(Job& job) : job_(job) {}
  ~LeaveGuard() {
    if (!ok_) job_.MarkFailed();
  }
  LeaveGuard(const LeaveGuard&) = delete;
  LeaveGuard& operator=(const LeaveGuard&) = delete;
  void Succeeded() { ok_ = true; }

 private:
  Job& job_;
  bool ok_ = false;
};

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_RENDEZVOUS_H_
