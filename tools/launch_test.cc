// Launch() called in-process (the CLI's own behaviour is tested through the binary in
// tests/cli_launch_test.cc): what it leaves behind when it fails partway.
#include "tools/launch.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"

namespace ddpio::tools {
namespace {

// The descriptor limit runs out while ranks are being started: Launch returns the error, and the
// ranks it did start are stopped and reaped, and SIGINT / SIGTERM are unblocked again — a caller
// that goes on is left with no stray children and its signals working.
TEST(LaunchInProcess, FailingToStartARankLeavesNoRankAndNoBlockedSignal) {
  auto codes = testing::RunForked(1, [](int) {
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    const rlimit limit{16,
                       16};  // room for the signalfd and a few ranks (3 descriptors each), not 64
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return 10;
    LaunchOptions o;
    o.nproc_per_node = 64;
    o.master_port = 29400;  // not used by the ranks; given so that no port is probed
    o.command = {"/bin/sleep", "60"};
    absl::StatusOr<int> result = Launch(o);
    if (result.ok()) return 11;
    if (result.status().message().find("pipe") == std::string_view::npos) return 12;
    if (waitpid(-1, nullptr, WNOHANG) != -1 || errno != ECHILD) return 13;  // a rank still running
    sigset_t blocked;
    sigprocmask(SIG_BLOCK, nullptr, &blocked);
    if (sigismember(&blocked, SIGINT) || sigismember(&blocked, SIGTERM)) return 14;
    return 0;
  });
  EXPECT_EQ(codes[0], 0)
      << "10 setrlimit, 11 no error, 12 not the pipe error, 13 a rank left, 14 signals blocked";
}

}  // namespace
}  // namespace ddpio::tools
