// Runs N real child processes and waits for them with a hard time limit.
//
// Multi-process tests fork their ranks with RunForked; a child still running after `limit` is
// killed and reported as 200 + SIGKILL (plus a test failure), so a hang fails the test instead of
// stalling CI. `after_fork` runs in the parent once every child exists (start a server the
// children connect to, close pipe ends...) and stays in scope until they all finished.
#ifndef DDPIO_TESTS_SUPPORT_MULTIPROCESS_H_
#define DDPIO_TESTS_SUPPORT_MULTIPROCESS_H_

#include <chrono>
#include <functional>
#include <vector>

namespace ddpio::testing {

// Returns each child's exit code (200 + signal when a signal ended it).
std::vector<int> RunForked(int n, const std::function<int(int index)>& body,
                           std::chrono::seconds limit = std::chrono::seconds(60),
                           const std::function<void()>& after_fork = {});

// A TCP port that was free a moment ago (bound to 127.0.0.1, then released).
int FreeLoopbackPort();

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_MULTIPROCESS_H_
