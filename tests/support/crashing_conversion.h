// A conversion that really crashes: Convert runs in a child process that ends with _exit (no
// destructors, no unwinding — what kill -9 leaves behind) right after its n-th commit. The
// fault is injected through tools::ConvertObserver, so the shipped converter holds no crash
// hook of its own. Tests of --resume start from what it leaves.
#ifndef DDPIO_TESTS_SUPPORT_CRASHING_CONVERSION_H_
#define DDPIO_TESTS_SUPPORT_CRASHING_CONVERSION_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "tools/convert.h"

namespace ddpio::testing {

// The exit code of a child that crashed where it was told to.
inline constexpr int kInjectedCrash = 86;

class CrashAfterCommit : public tools::ConvertObserver {
 public:
  explicit CrashAfterCommit(uint64_t n) : n_(n) {}
  void Committed(uint64_t n) override {
    if (n == n_) _exit(kInjectedCrash);
  }

 private:
  uint64_t n_;
};

// Converts `listing` with `options` in a child that crashes after commit `n`; returns the
// child's exit code: kInjectedCrash when the crash happened, 0 when the conversion finished
// first, 1 when it failed, 128 + signal when something else killed it.
inline int ConvertCrashingAfterCommit(const tools::SourceListing& listing, tools::ConvertOptions options,
                                      uint64_t n) {
  const pid_t pid = fork();
  if (pid == 0) {
    CrashAfterCommit crash(n);
    options.observer = &crash;
    options.progress = false;
    _exit(tools::Convert(listing, options).ok() ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_CRASHING_CONVERSION_H_
