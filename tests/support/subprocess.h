// Runs a program as a real child process and captures what it printed.
//
// Used by tests that exercise the `ddpio` command line and multi-process behaviour. Every run
// has a hard deadline: a child still running then is killed (SIGKILL, whole process group) and
// the result says so, so a hang fails the test instead of stalling CI.
#ifndef DDPIO_TESTS_SUPPORT_SUBPROCESS_H_
#define DDPIO_TESTS_SUPPORT_SUBPROCESS_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ddpio::testing {

struct RunResult {
  int exit_code = -1;  // the exit status, or -1 when killed by a signal
  int signal = 0;      // the signal that ended it, or 0
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
};

struct RunOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  std::map<std::string, std::string> env;  // added to (or overriding) this process's environment
  std::string stdin_data;
};

RunResult Run(const std::vector<std::string>& argv, const RunOptions& options = {});

// The `ddpio` binary under test (from the DDPIO_BIN environment variable set by CTest).
std::string DdpioBin();

// Runs `ddpio args...`.
RunResult RunDdpio(const std::vector<std::string>& args, const RunOptions& options = {});

// The last line of `text` (a --json result line).
std::string LastLine(const std::string& text);

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_SUBPROCESS_H_
