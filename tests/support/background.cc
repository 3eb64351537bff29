#include "tests/support/background.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace ddpio::testing {

Background::Background(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env) {
  int out[2];
  if (argv.empty() || ::pipe2(out, O_CLOEXEC) != 0) return;
  std::vector<std::string> args = argv;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);  // a group of its own: the destructor stops what it started too
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    std::vector<char*> p;
    for (auto& a : args) p.push_back(a.data());
    p.push_back(nullptr);
    ::execv(p[0], p.data());
    _exit(127);
  }
  ::close(out[1]);
  out_ = out[0];
  if (pid_ > 0) pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
}

Background::~Background() {
  if (pid_ > 0 && !exited()) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    if (Wait(std::chrono::seconds(10)) < 0) ::waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0) ::close(out_);
  if (pidfd_ >= 0) ::close(pidfd_);
}

bool Background::WaitFor(const std::string& text, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (output_.find(text) == std::string::npos) {
    if (!Pump(deadline)) return false;
  }
  return true;
}

int Background::Wait(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!exited() && pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return -1;
    if (::poll(&p, 1, static_cast<int>(left.count())) > 0) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      exited_at_ = std::chrono::steady_clock::now();
    }
  }
  // What it printed last (children it left may hold the pipe: a few seconds at most).
  while (Pump(std::chrono::steady_clock::now() + std::chrono::seconds(5))) {
  }
  return code_;
}

bool Background::Running() {
  if (exited() || pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
  code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  exited_at_ = std::chrono::steady_clock::now();
  return false;
}

pid_t Background::FirstChild() const {
  std::ifstream children("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) +
                         "/children");
  pid_t child = 0;
  children >> child;
  return child;
}

bool Background::Pump(std::chrono::steady_clock::time_point deadline) {
  pollfd p{out_, POLLIN, 0};
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (out_ < 0 || left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
    return false;
  }
  char buf[4096];
  const ssize_t n = ::read(out_, buf, sizeof(buf));
  if (n <= 0) return false;
  output_.append(buf, static_cast<size_t>(n));
  return true;
}

}  // namespace ddpio::testing
