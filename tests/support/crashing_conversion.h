// A conversion that really crashes: Convert runs in a child process that ends with _exit (no
// destructors, no unwinding — what kill -9 leaves behind) right after its n-th commit. The
// fault is injected through convert::ConvertObserver, so the shipped converter holds no crash
// hook of its own. Tests of --resume start from what it leaves.
#ifndef DDPIO_TESTS_SUPPORT_CRASHING_CONVERSION_H_
#define DDPIO_TESTS_SUPPORT_CRASHING_CONVERSION_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "ddpio/convert/convert.h"

namespace ddpio::testing {

// The exit code of a child that crashed where it was told to.
inline constexpr int kInjectedCrash = 86;

class CrashAfterCommit : public convert::ConvertObserver {
 public:
  explicit CrashAfterCommit(uint64_t n) : n_(n) {}
  void Committed(uint64_t n) override {
    if (n == n_) _exit(kInjectedCrash);
  }

 private:
  uint64_t n_;
};

// Runs `convert(options)` (a Convert, or something that calls it with these options) in a child
// that crashes after commit `n`; returns the child's exit code: kInjectedCrash when the crash
// happened, 0 when `convert` returned true first, 1 when false, 128 + signal when something else
// killed it.
template <typename Fn>
int RunCrashingAfterCommit(convert::ConvertOptions options, uint64_t n, Fn convert) {
  const pid_t pid = fork();
  if (pid == 0) {
    CrashAfterCommit crash(n);
    options.observer = &crash;
    _exit(convert(options) ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Converts `listing` with `options` in a child that crashes after commit `n` (as above).
inline int ConvertCrashingAfterCommit(const convert::SourceListing& listing,
                                      convert::ConvertOptions options, uint64_t n) {
  return RunCrashingAfterCommit(std::move(options), n, [&](const convert::ConvertOptions& o) {
    return convert::Convert(listing, o).ok();
  });
}

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_CRASHING_CONVERSION_H_
