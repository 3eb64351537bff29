#include "tools/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ddpio/comm/rank_info.h"
#include "ddpio/comm/tcp.h"
#include "ddpio/comm/tcp_store.h"
#include "ddpio/common/fd.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::tools {
namespace {

using Clock = std::chrono::steady_clock;

// How long output may stay open after every rank has exited (something that escaped the ranks'
// process groups holds it), and the longest line kept before it is written out unfinished.
constexpr std::chrono::seconds kDrainTime{2};
constexpr size_t kMaxPartialLine = 1 << 20;

// What every rank of the job shares: the rendezvous port, the store's token and the job id.
struct JobIdentity {
  int port = 0;
  std::string token;
  std::string job;
};

absl::Status CheckOptions(const LaunchOptions& o) {
  if (o.command.empty())
    return absl::InvalidArgumentError("no program to launch (put it after --)");
  if (o.nproc_per_node < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(absl::StrCat("--node-rank ", o.node_rank,
                                                   " must be in [0, --nnodes ", o.nnodes,
                                                   ") and --nproc-per-node >= 1"));
  }
  if (o.master_port == 0 && o.nnodes > 1) {
    return absl::InvalidArgumentError("--master-port is required with --nnodes > 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<JobIdentity> ResolveIdentity(const LaunchOptions& o, const comm::Environment& env) {
  JobIdentity id;
  id.port = o.master_port;
  if (id.port == 0) {
    DDPIO_ASSIGN_OR_RETURN(id.port, comm::FreeTcpPort(o.master_addr));
  }
  id.token = comm::EnvValue(env, "DDPIO_STORE_TOKEN");
  if (id.token.empty()) {
    if (o.nnodes > 1) {
      return absl::InvalidArgumentError(
          "with --nnodes > 1 every node needs the same DDPIO_STORE_TOKEN: set it in the "
          "environment");
    }
    id.token = comm::RandomToken(16);
  }
  id.job = comm::EnvValue(env, "DDPIO_JOB_ID");
  if (!id.job.empty()) return id;
  // Every node's launcher must name the same job without talking to the others: derive the name
  // from what they already share (the token and the rendezvous address).
  id.job = o.nnodes > 1 ? absl::StrCat("nodes-", absl::Hex(Fnv1a64(absl::StrCat(
                                                     id.token, "@", o.master_addr, ":", id.port))))
                        : comm::RandomToken(8);
  return id;
}

// What a node's launcher was told, as every launcher words it.
std::string Shape(int nnodes, int nproc_per_node) {
  return absl::StrCat("--nnodes ", nnodes, " --nproc-per-node ", nproc_per_node);
}

// Node 0's answer: "o" and its own shape when every node agrees, else "i" (disagreement:
// InvalidArgument) or "d" (a node never came: DeadlineExceeded) and the message.
absl::Status VerdictStatus(const std::string& verdict, int node_rank) {
  const std::string text = verdict.substr(std::min<size_t>(verdict.size(), 1));
  const std::string where = absl::StrCat(" (this is node ", node_rank, "; no rank was started)");
  if (!verdict.empty() && verdict[0] == 'o') return absl::OkStatus();
  if (!verdict.empty() && verdict[0] == 'd') return absl::DeadlineExceededError(text + where);
  return absl::InvalidArgumentError(text + where);
}

// Node 0: waits for every node's claim and shape, compares them with its own, answers.
absl::StatusOr<std::string> Decide(comm::Store& store, const LaunchOptions& o,
                                   const std::string& keys, Clock::time_point deadline) {
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  const std::string mine = Shape(o.nnodes, o.nproc_per_node);
  std::vector<std::string> differ, claimed_twice, missing;
  for (int n = 0; n < o.nnodes; ++n) {
    absl::StatusOr<std::string> shape = store.Get(absl::StrCat(keys, "node/", n), left());
    if (absl::IsDeadlineExceeded(shape.status())) {
      missing.push_back(std::to_string(n));
      continue;
    }
    DDPIO_RETURN_IF_ERROR(shape.status());
    if (*shape != mine) differ.push_back(absl::StrCat("node ", n, " has ", *shape));
  }
  // Once every node is in, a node rank claimed twice before the last node came is seen here; a
  // later second claimer finds the rank taken (or node 0 gone) and starts nothing itself.
  for (int n = 0; n < o.nnodes; ++n) {
    DDPIO_ASSIGN_OR_RETURN(int64_t claims, store.Add(absl::StrCat(keys, "claims/", n), 0));
    if (claims > 1)
      claimed_twice.push_back(
          absl::StrCat("--node-rank ", n, " was claimed by ", claims, " launchers"));
  }
  if (!claimed_twice.empty()) {
    return absl::StrCat("i", absl::StrJoin(claimed_twice, "; "),
                        ": every node's launcher needs its own --node-rank in [0, --nnodes)");
  }
  if (!differ.empty()) {
    constexpr size_t kShown =
        8;  // a job of many nodes: the first few are enough to see the mistake
    const size_t more = differ.size() > kShown ? differ.size() - kShown : 0;
    differ.resize(std::min(differ.size(), kShown));
    return absl::StrCat("ithe nodes' launchers disagree: node 0 has ", mine, ", ",
                        absl::StrJoin(differ, ", "),
                        more > 0 ? absl::StrCat(" (and ", more, " more)") : "",
                        ": start every node with the same --nnodes and --nproc-per-node");
  }
  if (!missing.empty()) {
    return absl::StrCat("dthe launcher of node(s) ", absl::StrJoin(missing, ", "),
                        " did not come within ", o.join_timeout.count(), " s (--join-timeout)");
  }
  return "o" + mine;
}

// Before any rank starts, the launchers of a multi-node job meet on the master port (launch.h).
absl::Status AgreeAcrossNodes(const LaunchOptions& o, const JobIdentity& id) {
  const std::string token =
      id.token + "/launchers";  // a rank's hello is refused here, never served
  const std::string where = absl::StrCat(o.master_addr, ":", id.port);
  const std::string keys = absl::StrCat("launch/", id.job, "/");
  const auto deadline = Clock::now() + o.join_timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  std::unique_ptr<comm::TcpStoreServer> server;
  if (o.node_rank == 0) {
    auto started = comm::TcpStoreServer::Start(o.master_addr, id.port, token);
    if (!started.ok()) {
      return Annotate(
          started.status(),
          absl::StrCat("node 0's launcher serving the other nodes' launchers on ", where,
                       " (is another launcher of node 0 running, or the port taken?)"));
    }
    server = std::move(started).value();
  }
  auto connected = comm::TcpStoreClient::Connect(o.master_addr, id.port, token, o.join_timeout);
  if (absl::IsPermissionDenied(connected.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("node 0's launcher at ", where,
                     " refused this node: DDPIO_STORE_TOKEN must be the same on every node"));
  }
  if (!connected.ok()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "no word from node 0's launcher at ", where, " within ", o.join_timeout.count(),
        " s (--join-timeout): start `ddpio launch --node-rank 0` there with the same "
        "--master-addr, --master-port and "
        "DDPIO_STORE_TOKEN (",
        connected.status().message(), ")"));
  }
  std::unique_ptr<comm::TcpStoreClient> store = std::move(connected).value();
  const std::string me = std::to_string(o.node_rank);
  DDPIO_ASSIGN_OR_RETURN(int64_t claims, store->Add(keys + "claims/" + me, 1));
  if (claims > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank ", o.node_rank, " is already taken by another launcher of ",
                     "this job (met at ", where, "): every node needs its own --node-rank"));
  }
  DDPIO_RETURN_IF_ERROR(store->Set(keys + "node/" + me, Shape(o.nnodes, o.nproc_per_node)));
  std::string verdict;
  if (o.node_rank == 0) {
    DDPIO_ASSIGN_OR_RETURN(verdict, Decide(*store, o, keys, deadline));
    DDPIO_RETURN_IF_ERROR(store->Set(keys + "verdict", verdict));
    // Every node that came has read the answer before the store goes (it would otherwise see
    // its connection closed instead of the reason).
    for (int n = 1; n < o.nnodes; ++n) {
      if (store->Check({keys + "node/" + std::to_string(n)}).value_or(false)) {
        (void)store->Wait({keys + "read/" + std::to_string(n)}, left());
      }
    }
    store.reset();
    server.reset();  // no longer listening: rank 0 can serve the job's store on this port
    return VerdictStatus(verdict, 0);
  }
  absl::StatusOr<std::string> answer = store->Get(keys + "verdict", left());
  if (!answer.ok()) {
    return absl::Status(
        answer.status().code(),
        absl::StrCat("node 0's launcher at ", where, " did not answer within --join-timeout ",
                     o.join_timeout.count(), " s: ", answer.status().message()));
  }
  verdict = *answer;
  DDPIO_RETURN_IF_ERROR(store->Set(keys + "read/" + me, "1"));
  if (verdict.empty() || verdict[0] != 'o') return VerdictStatus(verdict, o.node_rank);
  if (verdict.substr(1) !=
      Shape(o.nnodes, o.nproc_per_node)) {  // a node rank node 0 does not count
    return absl::InvalidArgumentError(
        absl::StrCat("the nodes' launchers disagree: node 0 has ", verdict.substr(1), ", node ",
                     o.node_rank, " has ", Shape(o.nnodes, o.nproc_per_node), " (this is node ",
                     o.node_rank, "; no rank was started)"));
  }
  // Start the ranks once node 0's launcher has stopped listening: a rank of this node must meet
  // rank 0's store on that port, never the launchers' (it closes this connection as it goes).
  absl::Status gone = store->Wait({keys + "never-set"}, left());
  if (gone.ok() || absl::IsDeadlineExceeded(gone)) {
    return absl::DeadlineExceededError(
        absl::StrCat("node 0's launcher at ", where, " agreed but did not give up ",
                     "the master port within --join-timeout ", o.join_timeout.count(), " s"));
  }
  return absl::OkStatus();
}

// The launcher's environment plus torchrun's variables for one rank.
std::vector<std::string> RankEnvironment(comm::Environment env, const LaunchOptions& o,
                                         const JobIdentity& id, int local) {
  env["RANK"] = std::to_string(o.node_rank * o.nproc_per_node + local);
  env["WORLD_SIZE"] = std::to_string(o.nnodes * o.nproc_per_node);
  env["LOCAL_RANK"] = std::to_string(local);
  env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  env["GROUP_RANK"] = std::to_string(o.node_rank);
  env["MASTER_ADDR"] = o.master_addr;
  env["MASTER_PORT"] = std::to_string(id.port);
  env["DDPIO_STORE_TOKEN"] = id.token;
  env["DDPIO_JOB_ID"] = id.job;
  env.erase("TORCHELASTIC_USE_AGENT_STORE");  // nobody serves a PyTorch store here
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// SIGINT / SIGTERM blocked and delivered through a signalfd while it lives; the mask is restored
// on every way out.
class SignalFd {
 public:
  static absl::StatusOr<std::unique_ptr<SignalFd>> Open() {
    auto s = std::unique_ptr<SignalFd>(new SignalFd());
    sigemptyset(&s->mask_);
    sigaddset(&s->mask_, SIGINT);
    sigaddset(&s->mask_, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &s->mask_, &s->old_mask_) != 0)
      return ErrnoToStatus(errno, "sigprocmask");
    s->blocked_ = true;
    s->fd_.reset(signalfd(-1, &s->mask_, SFD_CLOEXEC));
    if (!s->fd_.valid()) return ErrnoToStatus(errno, "signalfd");
    return s;
  }
  ~SignalFd() {
    if (blocked_) sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  int fd() const { return fd_.get(); }
  const sigset_t& old_mask() const { return old_mask_; }
  // The signal read, or 0.
  int Read() {
    signalfd_siginfo si;
    return ::read(fd_.get(), &si, sizeof(si)) == sizeof(si) ? static_cast<int>(si.ssi_signo) : 0;
  }

 private:
  SignalFd() = default;
  sigset_t mask_, old_mask_;
  bool blocked_ = false;
  Fd fd_;
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  Fd pidfd;
  Fd out, err;                   // read ends of its stdout / stderr
  std::string out_buf, err_buf;  // partial lines
  bool exited = false;
  int status = 0;
};

// Writes complete lines of `buf` to `fd` with the rank prefix; keeps a trailing partial line
// unless `flush`.
void EmitLines(int rank, std::string* buf, int fd, bool flush) {
  if (flush && !buf->empty() && buf->back() != '\n') buf->push_back('\n');
  size_t start = 0;
  for (size_t nl; (nl = buf->find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = absl::StrCat("[rank ", rank, "] ", buf->substr(start, nl - start + 1));
    ssize_t unused = ::write(fd, line.data(), line.size());
    (void)unused;
  }
  buf->erase(0, start);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                        ")");
  }
  return "ended";
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// The ranks of this node: started, watched, stopped together. Whatever way the launcher leaves,
// no rank outlives the supervisor (its destructor kills and reaps those still running).
class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, SignalFd& signals) : o_(o), signals_(signals) {}
  ~Supervisor() {
    for (Child& c : children_) {
      if (c.exited) continue;
      kill(-c.pid, SIGKILL);
      waitpid(c.pid, nullptr, 0);
    }
  }

  absl::Status Start(const JobIdentity& id);
  // Runs until every rank has exited and its output is drained; returns the exit code.
  int Run();

 private:
  absl::Status StartRank(int local, std::vector<std::string> env);
  void StopAll();
  void OnSignal();
  void OnExit(Child& c);
  void OnOutput(Child& c, bool is_err);
  void KillStragglers();
  void CloseOutput(Child& c);
  void EndLeftovers();
  int Report() const;

  const LaunchOptions& o_;
  SignalFd& signals_;
  std::vector<Child> children_;
  int failed_rank_ = -1, failed_status_ = 0, stop_signal_ = 0;
  Clock::time_point kill_deadline_ = Clock::time_point::max();
  Clock::time_point drain_deadline_ = Clock::time_point::max();  // set once every rank has exited
  bool stopping_ = false;
};

absl::Status Supervisor::Start(const JobIdentity& id) {
  const comm::Environment env = comm::CurrentEnvironment();
  children_.reserve(o_.nproc_per_node);
  for (int local = 0; local < o_.nproc_per_node; ++local) {
    DDPIO_RETURN_IF_ERROR(StartRank(local, RankEnvironment(env, o_, id, local)));
  }
  std::fprintf(stderr, "ddpio launch: started %d rank(s) [%d, %d) of %d; master %s:%d\n",
               o_.nproc_per_node, o_.node_rank * o_.nproc_per_node,
               (o_.node_rank + 1) * o_.nproc_per_node, o_.nnodes * o_.nproc_per_node,
               o_.master_addr.c_str(), id.port);
  return absl::OkStatus();
}

absl::Status Supervisor::StartRank(int local, std::vector<std::string> env) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  Fd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  Fd err_r(err_pipe[0]), err_w(err_pipe[1]);
  std::vector<char*> envp = Pointers(env);
  std::vector<std::string> args = o_.command;
  std::vector<char*> argv = Pointers(args);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid < 0) return ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    // A launcher killed with SIGKILL cannot stop its ranks: the kernel does (they would otherwise
    // train on with parent 1, holding their GPUs). Checked again after arming, in case the
    // launcher died in between.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(1);
    setpgid(0, 0);  // its own group: the launcher decides who gets which signal
    sigprocmask(SIG_SETMASK, &signals_.old_mask(), nullptr);
    int devnull = ::open("/dev/null", O_RDONLY);
    dup2(devnull, STDIN_FILENO);
    if (devnull > STDERR_FILENO) ::close(devnull);
    dup2(out_w.get(), STDOUT_FILENO);
    dup2(err_w.get(), STDERR_FILENO);
    execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "ddpio launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  Child& c = children_.emplace_back();
  c.rank = o_.node_rank * o_.nproc_per_node + local;
  c.pid = pid;  // from here on the destructor stops it if anything below fails
  c.out = std::move(out_r);
  c.err = std::move(err_r);
  c.pidfd.reset(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (!c.pidfd.valid())
    return ErrnoToStatus(errno, "pidfd_open (Linux >= 5.3 is needed to watch the ranks)");
  return absl::OkStatus();
}

void Supervisor::StopAll() {
  if (stopping_) return;
  stopping_ = true;
  kill_deadline_ = Clock::now() + o_.grace;
  // Exited ranks too: a process a rank left behind in its group would hold its output open.
  for (Child& c : children_) kill(-c.pid, SIGTERM);
}

void Supervisor::OnSignal() {
  const int sig = signals_.Read();
  if (sig == 0 || stop_signal_ != 0) return;
  stop_signal_ = sig;
  std::fprintf(stderr, "ddpio launch: %s received; stopping all ranks\n", strsignal(sig));
  StopAll();
}

void Supervisor::OnExit(Child& c) {
  int status = 0;
  if (waitpid(c.pid, &status, WNOHANG) != c.pid) return;
  c.exited = true;
  c.status = status;
  if (ExitCodeOf(status) != 0 && failed_rank_ < 0 && !stopping_) {
    failed_rank_ = c.rank;
    failed_status_ = status;
    StopAll();
  }
}

void Supervisor::OnOutput(Child& c, bool is_err) {
  Fd& fd = is_err ? c.err : c.out;
  std::string& buf = is_err ? c.err_buf : c.out_buf;
  const int to = is_err ? STDERR_FILENO : STDOUT_FILENO;
  char chunk[65536];
  const ssize_t got = ::read(fd.get(), chunk, sizeof(chunk));
  if (got > 0) {
    buf.append(chunk, static_cast<size_t>(got));
    EmitLines(c.rank, &buf, to, false);
    if (buf.size() > kMaxPartialLine) EmitLines(c.rank, &buf, to, true);  // a line without end
  } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
    EmitLines(c.rank, &buf, to, true);
    fd.reset();
  }
}

void Supervisor::CloseOutput(Child& c) {
  if (c.out.valid()) EmitLines(c.rank, &c.out_buf, STDOUT_FILENO, true), c.out.reset();
  if (c.err.valid()) EmitLines(c.rank, &c.err_buf, STDERR_FILENO, true), c.err.reset();
}

void Supervisor::EndLeftovers() {
  for (Child& c : children_) {
    if (kill(-c.pid, SIGKILL) == 0) {
      std::fprintf(stderr,
                   "ddpio launch: rank %d exited leaving processes in its group; killed them\n",
                   c.rank);
    }
  }
  drain_deadline_ = Clock::now() + kDrainTime;
}

void Supervisor::KillStragglers() {
  for (Child& c : children_) {
    if (c.exited) continue;
    std::fprintf(stderr,
                 "ddpio launch: rank %d did not stop within %lld s of SIGTERM; sending SIGKILL\n",
                 c.rank, static_cast<long long>(o_.grace.count()));
    kill(-c.pid, SIGKILL);
  }
  for (Child& c : children_) {
    if (c.exited) kill(-c.pid, SIGKILL);  // what an exited rank left behind
  }
  kill_deadline_ = Clock::time_point::max();
}

int Supervisor::Run() {
  enum Source { kSignal, kOut, kErr, kExit };
  for (;;) {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<std::pair<Child*, Source>> what{{nullptr, kSignal}};
    bool all_exited = true, done = true;
    for (Child& c : children_) {
      if (c.out.valid()) fds.push_back({c.out.get(), POLLIN, 0}), what.push_back({&c, kOut});
      if (c.err.valid()) fds.push_back({c.err.get(), POLLIN, 0}), what.push_back({&c, kErr});
      if (!c.exited) fds.push_back({c.pidfd.get(), POLLIN, 0}), what.push_back({&c, kExit});
      all_exited = all_exited && c.exited;
      done = done && c.exited && !c.out.valid() && !c.err.valid();
    }
    if (done) return Report();
    // Every rank has exited but some output is still open: a process a rank left running holds
    // it. Kill what is left in the ranks' groups; drain for a bounded time.
    if (all_exited && drain_deadline_ == Clock::time_point::max()) EndLeftovers();
    const Clock::time_point deadline = std::min(kill_deadline_, drain_deadline_);
    int timeout_ms = -1;
    if (deadline != Clock::time_point::max()) {
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0,
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    }
    const int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    // Deadlines are checked on every pass: a rank that keeps writing keeps poll from timing out.
    if (Clock::now() >= kill_deadline_) KillStragglers();  // the grace period is over
    if (Clock::now() >= drain_deadline_) {
      for (Child& c : children_) CloseOutput(c);
      continue;
    }
    for (size_t k = 0; n > 0 && k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      auto [c, source] = what[k];
      if (source == kSignal) OnSignal();
      if (source == kExit) OnExit(*c);
      if (source == kOut || source == kErr) OnOutput(*c, source == kErr);
    }
  }
}

int Supervisor::Report() const {
  if (failed_rank_ >= 0) {
    std::fprintf(stderr, "ddpio launch: rank %d failed: %s; stopped the other %zu rank(s)\n",
                 failed_rank_, Describe(failed_status_).c_str(), children_.size() - 1);
    return ExitCodeOf(failed_status_);
  }
  return stop_signal_ != 0 ? 128 + stop_signal_ : 0;
}

}  // namespace

absl::StatusOr<int> Launch(const LaunchOptions& o) {
  DDPIO_RETURN_IF_ERROR(CheckOptions(o));
  DDPIO_ASSIGN_OR_RETURN(JobIdentity id, ResolveIdentity(o, comm::CurrentEnvironment()));
  // Before the signal mask: Ctrl-C while the nodes meet ends the launcher at once (no rank yet).
  if (o.nnodes > 1) DDPIO_RETURN_IF_ERROR(AgreeAcrossNodes(o, id));
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<SignalFd> signals, SignalFd::Open());
  Supervisor ranks(o, *signals);
  DDPIO_RETURN_IF_ERROR(ranks.Start(id));
  return ranks.Run();
}

}  // namespace ddpio::tools
