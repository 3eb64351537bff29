// Progress reporting for long-running tools, on stderr.
//
// On a terminal: one line redrawn in place at most 10 times a second ("convert 1234/5000
// 24.7% 850/s ETA 4s"). Otherwise (CI logs, pipes): a plain line every `interval` seconds and a
// final one, so logs stay readable. Not thread-safe: call from the thread that drives the work.
#ifndef DDPIO_TOOLS_CLI_PROGRESS_H_
#define DDPIO_TOOLS_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace ddpio::tools {

class Progress {
 public:
  // `total` 0 means unknown. `enabled` false prints nothing (e.g. --quiet).
  Progress(std::string label, uint64_t total, bool enabled = true,
           std::chrono::seconds interval = std::chrono::seconds(5));
  void Update(uint64_t done);
  // Prints the final line (and ends the in-place line on a terminal).
  void Finish(uint64_t done);

 private:
  void Print(uint64_t done, bool final);

  const std::string label_;
  const uint64_t total_;
  const bool enabled_;
  const bool tty_;
  const std::chrono::seconds interval_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CLI_PROGRESS_H_
