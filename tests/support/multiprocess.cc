#include "tests/support/multiprocess.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "gtest/gtest.h"

namespace ddpio::testing {

std::vector<int> RunForked(int n, const std::function<int(int)>& body, std::chrono::seconds limit,
                           const std::function<void()>& after_fork) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) _exit(body(i));
    pids.push_back(pid);
  }
  if (after_fork) after_fork();
  std::vector<int> codes(n, -1);
  std::vector<pollfd> fds;
  for (pid_t pid : pids)
    fds.push_back({static_cast<int>(syscall(SYS_pidfd_open, pid, 0)), POLLIN, 0});
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int left = n;
  auto reap = [&](int i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
    ::close(fds[i].fd);
    fds[i].fd = -1;  // poll ignores negative descriptors
    --left;
  };
  while (left > 0) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    int ready = poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(ms.count(), 0)));
    if (ready == 0) {
      for (int i = 0; i < n; ++i) {
        if (codes[i] != -1) continue;
        kill(pids[i], SIGKILL);
        ADD_FAILURE() << "child " << i << " still running after " << limit.count() << " s: killed";
        reap(i);
      }
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (codes[i] == -1 && fds[i].fd >= 0 && (fds[i].revents & POLLIN)) reap(i);
    }
  }
  return codes;
}

int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace ddpio::testing
