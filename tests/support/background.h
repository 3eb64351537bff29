// A program running in the background of a test: its output (stdout and stderr, in one stream)
// collected as it comes, its exit watched, and SIGKILL to its process group at the end of scope
// if it still runs (what it started goes with it).
//
// For what a test must start and then act on while it runs: a launcher whose rank it kills, a
// proxy whose port it learns from its first line. Every wait has a limit.
#ifndef DDPIO_TESTS_SUPPORT_BACKGROUND_H_
#define DDPIO_TESTS_SUPPORT_BACKGROUND_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ddpio::testing {

class Background {
 public:
  // Starts argv[0] (a path) with `env` added to this process's environment.
  Background(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env = {});
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  // Reads the output until `text` appears in it or `limit` passes; true when it appeared.
  bool WaitFor(const std::string& text, std::chrono::seconds limit);
  // Waits for the program to exit (at most `limit`): its exit code (128 + signal when a signal
  // ended it), or -1 if it is still running.
  int Wait(std::chrono::seconds limit);
  bool exited() const { return code_ >= 0; }
  // Whether it is still running, without waiting (reaps it if it has exited).
  bool Running();
  std::chrono::steady_clock::time_point exited_at() const { return exited_at_; }
  // What it printed so far.
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }
  // The first child process it started (a launcher's rank), or 0.
  pid_t FirstChild() const;

 private:
  // One read of the output, waiting at most until `deadline`; false at end of file or the deadline.
  bool Pump(std::chrono::steady_clock::time_point deadline);
  pid_t pid_ = -1;
  int out_ = -1, pidfd_ = -1, code_ = -1;
  std::string output_;
  std::chrono::steady_clock::time_point exited_at_{};
};

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_BACKGROUND_H_
