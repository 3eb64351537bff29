#include "tools/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/tcp.h"
#include "ddpio/comm/tcp_store.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/status_macros.h"

extern char** environ;

namespace ddpio::tools {
namespace {

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int pidfd = -1;
  int out = -1, err = -1;       // read ends of its stdout / stderr
  std::string out_buf, err_buf;  // partial lines
  bool exited = false;
  int status = 0;
};

std::string Describe(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  }
  return "ended";
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Writes complete lines of `buf` to `fd` with the rank prefix; keeps a trailing partial line
// unless `flush`.
void EmitLines(int rank, std::string* buf, int fd, bool flush) {
  size_t start = 0;
  for (;;) {
    size_t nl = buf->find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = absl::StrCat("[rank ", rank, "] ", buf->substr(start, nl - start + 1));
    ssize_t unused = ::write(fd, line.data(), line.size());
    (void)unused;
    start = nl + 1;
  }
  buf->erase(0, start);
  if (flush && !buf->empty()) {
    std::string line = absl::StrCat("[rank ", rank, "] ", *buf, "\n");
    ssize_t unused = ::write(fd, line.data(), line.size());
    (void)unused;
    buf->clear();
  }
}

}  // namespace

absl::StatusOr<int> Launch(const LaunchOptions& o) {
  if (o.command.empty()) return absl::InvalidArgumentError("no program to launch (put it after --)");
  if (o.nproc_per_node < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(absl::StrCat("--node-rank ", o.node_rank, " must be in [0, --nnodes ",
                                                   o.nnodes, ") and --nproc-per-node >= 1"));
  }
  int port = o.master_port;
  if (port == 0) {
    if (o.nnodes > 1) return absl::InvalidArgumentError("--master-port is required with --nnodes > 1");
    DDPIO_ASSIGN_OR_RETURN(port, comm::FreeTcpPort(o.master_addr));
  }
  const char* env_token = std::getenv("DDPIO_STORE_TOKEN");
  if (o.nnodes > 1 && (env_token == nullptr || *env_token == '\0')) {
    return absl::InvalidArgumentError(
        "with --nnodes > 1 every node needs the same DDPIO_STORE_TOKEN: set it in the environment");
  }
  const std::string token = env_token != nullptr && *env_token != '\0' ? env_token : comm::RandomToken(16);
  const char* env_job = std::getenv("DDPIO_JOB_ID");
  std::string job;
  if (env_job != nullptr && *env_job != '\0') {
    job = env_job;
  } else if (o.nnodes > 1) {
    // Every node's launcher must name the same job without talking to the others: derive the
    // name from what they already share (the token and the rendezvous address).
    job = absl::StrCat("nodes-", absl::Hex(Fnv1a64(absl::StrCat(token, "@", o.master_addr, ":", port))));
  } else {
    job = comm::RandomToken(8);
  }
  const int world = o.nnodes * o.nproc_per_node;

  // SIGINT / SIGTERM arrive through a signalfd in the event loop; SIGCHLD is not needed
  // (pidfds).
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);

  std::vector<Child> children(o.nproc_per_node);
  for (int local = 0; local < o.nproc_per_node; ++local) {
    Child& c = children[local];
    c.rank = o.node_rank * o.nproc_per_node + local;
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
      return ErrnoToStatus(errno, "pipe");
    }
    std::map<std::string, std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      auto eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    env["RANK"] = std::to_string(c.rank);
    env["WORLD_SIZE"] = std::to_string(world);
    env["LOCAL_RANK"] = std::to_string(local);
    env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
    env["GROUP_RANK"] = std::to_string(o.node_rank);
    env["MASTER_ADDR"] = o.master_addr;
    env["MASTER_PORT"] = std::to_string(port);
    env["DDPIO_STORE_TOKEN"] = token;
    env["DDPIO_JOB_ID"] = job;
    env.erase("TORCHELASTIC_USE_AGENT_STORE");  // nobody serves a PyTorch store here
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = o.command;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid < 0) return ErrnoToStatus(errno, "fork");
    if (pid == 0) {
      // A launcher killed with SIGKILL cannot stop its ranks: the kernel does (they would
      // otherwise train on with parent 1, holding their GPUs). Checked again after arming, in
      // case the launcher died in between.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(1);
      setpgid(0, 0);  // its own group: the launcher decides who gets which signal
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      int devnull = ::open("/dev/null", O_RDONLY);
      dup2(devnull, STDIN_FILENO);
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
      execvpe(argv[0], argv.data(), envp.data());
      std::fprintf(stderr, "ddpio launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    c.pid = pid;
    c.out = out_pipe[0];
    c.err = err_pipe[0];
    c.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  }
  std::fprintf(stderr, "ddpio launch: started %d rank(s) [%d, %d) of %d; master %s:%d\n",
               o.nproc_per_node, o.node_rank * o.nproc_per_node,
               (o.node_rank + 1) * o.nproc_per_node, world, o.master_addr.c_str(), port);

  int failed_rank = -1, failed_status = 0, stop_signal = 0;
  bool stopping = false;
  auto stop_all = [&]() {
    if (stopping) return;
    stopping = true;
    for (auto& c : children) {
      if (!c.exited) kill(-c.pid, SIGTERM);
    }
  };
  auto kill_deadline = std::chrono::steady_clock::time_point::max();
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> what;  // (child index, 0 out / 1 err / 2 exit), -1 = signal
    fds.push_back({sigfd, POLLIN, 0});
    what.push_back({-1, 0});
    bool open_streams = false;
    for (size_t i = 0; i < children.size(); ++i) {
      Child& c = children[i];
      if (c.out >= 0) { fds.push_back({c.out, POLLIN, 0}); what.push_back({static_cast<int>(i), 0}); open_streams = true; }
      if (c.err >= 0) { fds.push_back({c.err, POLLIN, 0}); what.push_back({static_cast<int>(i), 1}); open_streams = true; }
      if (!c.exited) { fds.push_back({c.pidfd, POLLIN, 0}); what.push_back({static_cast<int>(i), 2}); }
    }
    bool all_exited = true;
    for (auto& c : children) all_exited = all_exited && c.exited;
    if (all_exited && !open_streams) break;
    int timeout_ms = -1;
    if (stopping && kill_deadline != std::chrono::steady_clock::time_point::max()) {
      timeout_ms = static_cast<int>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                             kill_deadline - std::chrono::steady_clock::now()).count()));
    }
    int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && stopping) {  // grace period over
      for (auto& c : children) {
        if (c.exited) continue;
        std::fprintf(stderr, "ddpio launch: rank %d did not stop within %lld s of SIGTERM; sending SIGKILL\n",
                     c.rank, static_cast<long long>(o.grace.count()));
        kill(-c.pid, SIGKILL);
      }
      kill_deadline = std::chrono::steady_clock::time_point::max();
      continue;
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      auto [idx, kind] = what[k];
      if (idx < 0) {
        signalfd_siginfo si;
        ssize_t got = ::read(sigfd, &si, sizeof(si));
        if (got == sizeof(si) && stop_signal == 0) {
          stop_signal = static_cast<int>(si.ssi_signo);
          std::fprintf(stderr, "ddpio launch: %s received; stopping all ranks\n", strsignal(stop_signal));
          stop_all();
          kill_deadline = std::chrono::steady_clock::now() + o.grace;
        }
        continue;
      }
      Child& c = children[idx];
      if (kind == 2) {
        int status = 0;
        if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
          c.exited = true;
          c.status = status;
          if (ExitCodeOf(status) != 0 && failed_rank < 0 && !stopping) {
            failed_rank = c.rank;
            failed_status = status;
            stop_all();
            kill_deadline = std::chrono::steady_clock::now() + o.grace;
          }
        }
        continue;
      }
      int& fd = kind == 0 ? c.out : c.err;
      std::string& buf = kind == 0 ? c.out_buf : c.err_buf;
      char chunk[65536];
      ssize_t got = ::read(fd, chunk, sizeof(chunk));
      if (got > 0) {
        buf.append(chunk, static_cast<size_t>(got));
        EmitLines(c.rank, &buf, kind == 0 ? STDOUT_FILENO : STDERR_FILENO, false);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        EmitLines(c.rank, &buf, kind == 0 ? STDOUT_FILENO : STDERR_FILENO, true);
        ::close(fd);
        fd = -1;
      }
    }
  }
  for (auto& c : children) ::close(c.pidfd);
  ::close(sigfd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  if (failed_rank >= 0) {
    int stopped = 0;
    for (auto& c : children) stopped += c.rank != failed_rank;
    std::fprintf(stderr, "ddpio launch: rank %d failed: %s; stopped the other %d rank(s)\n", failed_rank,
                 Describe(failed_status).c_str(), stopped);
    return ExitCodeOf(failed_status);
  }
  if (stop_signal != 0) return 128 + stop_signal;
  return 0;
}

}  // namespace ddpio::tools
