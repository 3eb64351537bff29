#include "ddpio/comm/rendezvous.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/tcp_store.h"
#include "ddpio/comm/torch_store.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/device/probe.h"

namespace ddpio::comm {
namespace {

// A frozen store must not hold a rank longer than the job's timeout (the default reply
// allowance is 30 s).
// `timeout`: the connection's own (the heartbeat's is shorter), at most the job's.
TcpStoreLimits StoreLimits(const RendezvousOptions& options,
                           std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) {
  TcpStoreLimits limits;
  limits.reply_timeout = std::min({limits.reply_timeout, options.timeout, timeout});
  return limits;
}

// A rank of a world of several with no store to meet the others through: the usual cause is a
// launcher's variables without the launcher (WORLD_SIZE exported in a shell, a process started
// by hand inside an allocation). Say what was found and how jobs are started.
absl::Status NoLauncherStore(const RankInfo& info) {
  if (info.torchrun_rendezvous) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this process is rank ", info.rank, " of ", info.world_size,
        " started by torchrun with a rendezvous backend (--rdzv_backend c10d, as elastic jobs "
        "are), which serves its workers no store: set DDPIO_STORE_TOKEN to the same secret on "
        "every node before torchrun (e.g. export DDPIO_STORE_TOKEN=$(openssl rand -hex 16) on one "
        "and copy it); rank 0 then serves ddpio's store on MASTER_ADDR:MASTER_PORT"));
  }
  const std::string from =
      info.source == RankSource::kFlags      ? "the command line"
      : info.source == RankSource::kTorchrun ? "RANK/WORLD_SIZE in the environment"
      : info.source == RankSource::kCaller
          ? "the caller"
          : absl::StrCat(RankSourceName(info.source), "'s environment variables");
  absl::Status status = absl::FailedPreconditionError(absl::StrCat(
      "this process is rank ", info.rank, " of ", info.world_size, " according to ", from,
      ", but no launcher serves a rendezvous store for it (DDPIO_STORE_TOKEN is not set): start "
      "every rank "
      "with a launcher (`ddpio launch --nproc-per-node N -- PROGRAM`, `torchrun --nproc_per_node N "
      "...`, srun or "
      "mpirun, with DDPIO_STORE_TOKEN set to the same secret on every rank for the last two), or "
      "from "
      "Python call torch.distributed.init_process_group() first; to run alone, ",
      info.source == RankSource::kFlags     ? "leave the rank and world size unset (RankFlags)"
      : info.source == RankSource::kSlurm   ? "unset SLURM_PROCID/SLURM_NTASKS"
      : info.source == RankSource::kOpenMpi ? "unset OMPI_COMM_WORLD_*"
                                            : "unset RANK and WORLD_SIZE"));
  return info.source == RankSource::kFlags ? WithSetting(WithSetting(status, "rank"), "world_size")
                                           : status;
}

// Every rank's heartbeat (liveness.h) on a connection of its own to the job's store. A store
// reached through Python (torch.distributed's) is not beaten on from a thread of ours — that
// would take the interpreter's lock at any moment, exit included —: the PyTorch TCPStore behind
// it is reached directly when the caller names it, else there are no heartbeats (null).
absl::StatusOr<std::unique_ptr<Heartbeat>> StartHeartbeat(
    const RankInfo& info, const RendezvousOptions& options, const std::string& address,
    const std::string& where, std::shared_ptr<Store> job_store,
    const std::function<absl::StatusOr<std::shared_ptr<Store>>(std::chrono::milliseconds)>&
        connect) {
  const auto period = HeartbeatPeriod(options.timeout);
  // The beats' requests time out sooner than the job's: a census must not wait on a dead store.
  const auto beat_timeout = std::min<std::chrono::milliseconds>(
      options.timeout, std::max<std::chrono::milliseconds>(2 * period, std::chrono::seconds(2)));
  const std::string job_prefix = absl::StrCat("job/", options.job_id);
  if (options.external_store != nullptr) {
    if (options.heartbeat_store_host.empty()) return nullptr;
    TorchStoreOptions to;
    to.connect_timeout = beat_timeout;
    auto direct = [&]() -> absl::StatusOr<std::shared_ptr<Store>> {
      DDPIO_ASSIGN_OR_RETURN(auto c, TorchStoreClient::Connect(options.heartbeat_store_host,
                                                               options.heartbeat_store_port, to));
      return std::make_shared<PrefixStore>(absl::StrCat("ddpio-live/", job_prefix),
                                           std::shared_ptr<Store>(std::move(c)));
    };
    DDPIO_ASSIGN_OR_RETURN(auto census, direct());
    DDPIO_ASSIGN_OR_RETURN(auto beats, direct());
    return std::make_unique<Heartbeat>(
        census, beats, info.rank, info.world_size, address,
        absl::StrCat(where, " at tcp://", options.heartbeat_store_host, ":",
                     options.heartbeat_store_port),
        period);
  }
  const std::string host =
      info.agent_store ? absl::StrCat(where, ", served by torchrun's agent on the first node")
      : options.store.rfind("file:", 0) == 0 ? where
                                             : absl::StrCat(where, ", served by rank 0");
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<Store> beats, connect(beat_timeout));
  return std::make_unique<Heartbeat>(std::move(job_store),
                                     std::make_shared<PrefixStore>(job_prefix, beats), info.rank,
                                     info.world_size, address, host, period);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Job>> Job::Join(const RankInfo& info, RendezvousOptions options) {
  return Join(info, std::move(options), CurrentEnvironment());
}

absl::StatusOr<std::unique_ptr<Job>> Job::Join(const RankInfo& info, RendezvousOptions options,
                                               const Environment& env) {
  if (options.token.empty()) options.token = EnvValue(env, "DDPIO_STORE_TOKEN");
  if (options.job_id.empty()) options.job_id = EnvValue(env, "DDPIO_JOB_ID");
  if (options.job_id.empty() && info.agent_store) {
    // torchrun: one namespace per run and restart attempt, like PyTorch's own /worker/attempt_N.
    options.job_id = absl::StrCat("torchrun-", EnvValue(env, "TORCHELASTIC_RUN_ID"), "-attempt",
                                  EnvValue(env, "TORCHELASTIC_RESTART_COUNT"));
  }
  if (options.job_id.empty()) options.job_id = "default";
  // Decide the backend before touching the network: a rank that cannot use it fails at once.
  DDPIO_ASSIGN_OR_RETURN(BackendChoice choice, ChooseBackend(options.backend, device::Probe()));
  options.comm.local_rank = info.local_rank;
  DDPIO_ASSIGN_OR_RETURN(AdvertiseAddress advertise,
                         ChooseAdvertiseAddress(options.advertise_addr, env, info.master_addr));
  options.comm.gloo.hostname = advertise.address;
  auto job = std::unique_ptr<Job>(new Job());
  job->info_ = info;
  job->backend_ = choice;
  job->advertise_ = advertise;
  job->options_ = options;
  // `connect(timeout)`: a connection to the job's store, made twice — the job's, and the
  // heartbeat's own (liveness.h), whose requests time out sooner.
  std::function<absl::StatusOr<std::shared_ptr<Store>>(std::chrono::milliseconds)> connect;
  std::string where = absl::StrCat("tcp://", info.master_addr, ":", info.master_port);
  if (options.external_store != nullptr) {
    connect = [&](std::chrono::milliseconds) -> absl::StatusOr<std::shared_ptr<Store>> {
      return options.external_store;
    };
    where = options.external_store_name;
  } else if (options.store.rfind("file:", 0) == 0) {
    connect = [&](std::chrono::milliseconds) -> absl::StatusOr<std::shared_ptr<Store>> {
      return FileStore::Open(options.store.substr(5));
    };
    where = options.store;
  } else if (info.agent_store) {
    // torchrun's agent already serves a PyTorch TCPStore on the master port.
    TorchStoreOptions to;
    to.connect_timeout = options.timeout;
    DDPIO_ASSIGN_OR_RETURN(to.protocol,
                           ParseTorchStoreProtocol(EnvValue(env, "DDPIO_TORCH_STORE_PROTOCOL")));
    connect = [&info, to](std::chrono::milliseconds) -> absl::StatusOr<std::shared_ptr<Store>> {
      return TorchStoreClient::Connect(info.master_addr, info.master_port, to);
    };
    where = absl::StrCat("torchrun agent tcp://", info.master_addr, ":", info.master_port);
  } else if (info.source == RankSource::kSingleProcess && info.world_size == 1 &&
             options.token.empty()) {
    // Started alone, by no launcher: nobody else will join, so serve a private store on a free
    // loopback port with a random token (no DDPIO_STORE_TOKEN needed, no port to collide on).
    const std::string token = RandomToken();
    DDPIO_ASSIGN_OR_RETURN(job->server_, TcpStoreServer::Start("127.0.0.1", 0, token));
    const int port = job->server_->port();
    connect = [&options, token,
               port](std::chrono::milliseconds timeout) -> absl::StatusOr<std::shared_ptr<Store>> {
      return TcpStoreClient::Connect("127.0.0.1", port, token, timeout,
                                     StoreLimits(options, timeout));
    };
    where = absl::StrCat("private tcp://127.0.0.1:", port);
  } else {
    if (options.token.empty()) return NoLauncherStore(info);
    if (info.rank == 0) {
      DDPIO_ASSIGN_OR_RETURN(
          job->server_, TcpStoreServer::Start(info.master_addr, info.master_port, options.token));
    }
    connect = [&info, &options](
                  std::chrono::milliseconds timeout) -> absl::StatusOr<std::shared_ptr<Store>> {
      return TcpStoreClient::Connect(info.master_addr, info.master_port, options.token, timeout,
                                     StoreLimits(options, timeout));
    };
  }
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<Store> base, connect(options.timeout));
  job->store_ = std::make_shared<PrefixStore>(absl::StrCat("job/", options.job_id), base);
  auto world = CreateCommunicator(choice, std::make_shared<PrefixStore>("world", job->store_),
                                  info.rank, info.world_size, options.comm);
  if (!world.ok()) {
    // The usual cause across hosts: an address the peers cannot reach. Say which one was used.
    return Annotate(world.status(),
                    absl::StrCat("joining job ", options.job_id, " (this rank advertises ",
                                 advertise.address, ": ", advertise.why,
                                 "; set GLOO_SOCKET_IFNAME or DDPIO_ADVERTISE_ADDR to an "
                                 "address the other hosts reach)"));
  }
  job->world_ = std::move(world).value();
  // Join returns once every rank has joined, as torch.distributed's init does (its store-based
  // barrier): Gloo's mesh connect can return on one rank while another is still finishing its
  // side of their pair, and a rank that went on and left at once would cut that pair under it.
  DDPIO_RETURN_IF_ERROR(
      Annotate(job->world_->Barrier(options.timeout), "waiting for every rank to join"));
  if (info.world_size > 1) {
    DDPIO_ASSIGN_OR_RETURN(job->heartbeat_, StartHeartbeat(info, options, advertise.address, where,
                                                           job->store_, connect));
  }
  std::string nccl_if;
  if (choice.kind == BackendKind::kNccl) {
    const std::string v = EnvValue(env, "NCCL_SOCKET_IFNAME");
    nccl_if = v.empty() ? "; NCCL picks its own interface (NCCL_SOCKET_IFNAME unset)"
                        : "; NCCL_SOCKET_IFNAME=" + v;
  }
  DDPIO_LOG(INFO) << "joined job " << options.job_id << " as rank " << info.rank << " of "
                  << info.world_size << " (" << RankSourceName(info.source) << ", store " << where
                  << ", backend " << choice.why << ", advertising " << advertise.address << ": "
                  << advertise.why << nccl_if << ")";
  return job;
}

absl::StatusOr<std::unique_ptr<Communicator>> Job::Group(const GroupLayout& layout,
                                                         bool host_memory) {
  if (layout.world_size() != info_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("layout for a world of ", layout.world_size(),
                                                   ", job has ", info_.world_size));
  }
  // The n-th layout created in the job gets its own namespace; each group one under it.
  const std::string prefix =
      absl::StrCat("groups/", groups_created_++, "/", layout.group_rank(info_.rank));
  const BackendChoice gloo{BackendKind::kGloo, "host memory asked for"};
  DDPIO_ASSIGN_OR_RETURN(
      auto group, CreateCommunicator(
                      host_memory ? gloo : backend_, std::make_shared<PrefixStore>(prefix, store_),
                      layout.local_group_rank(info_.rank), layout.group_size(), options_.comm));
  // As in Join: every member's side of the group's connections is complete before anyone goes on.
  DDPIO_RETURN_IF_ERROR(
      Annotate(group->Barrier(options_.timeout), "waiting for the group's members"));
  return group;
}

Census Job::TakeCensus() {
  if (info_.world_size <= 1) return Census{};  // nobody else to vanish: nothing to say
  if (heartbeat_ == nullptr) {
    Census c;
    c.line =
        "(no heartbeats: the job's store is reached through Python and is not a TCPStore, so the "
        "ranks that vanished are not known)";
    return c;
  }
  return heartbeat_->Take();
}

absl::Status Job::WithCensus(const absl::Status& failure) {
  const absl::StatusCode code = failure.code();
  if (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kDeadlineExceeded &&
      code != absl::StatusCode::kAborted) {
    return failure;
  }
  const Census c = TakeCensus();
  if (c.line.empty()) return failure;
  return absl::Status(failure.code(), absl::StrCat(failure.message(), "; ", c.line));
}

Job::~Job() {
  // A store whose host is gone is not waited on below (the heartbeat saw it go silent).
  const bool store_gone = heartbeat_ != nullptr && heartbeat_->store_silent();
  heartbeat_.reset();  // before the store is waited on below
  world_.reset();
  if (store_ == nullptr || (store_gone && server_ == nullptr)) return;
  // Leaving after an error: the others are failing too (or gone), and the store may be the
  // thing that froze — a rank that is not serving it does not wait on it at all.
  if (failed_ && server_ == nullptr) return;
  // Count ourselves out; the last one out says so, and rank 0 keeps serving until then.
  auto left = store_->Add("left", 1);
  if (left.ok() && *left == info_.world_size) (void)store_->Set("all-left", "1");
  if (server_ != nullptr && left.ok()) {
    const auto patience =
        failed_ ? std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(2))
                : options_.timeout;
    absl::Status st = store_->Wait({"all-left"}, patience);
    if (!st.ok())
      DDPIO_LOG(WARNING) << "stopping the store before every rank left: " << st.message();
  }
}

}  // namespace ddpio::comm
