// Progress reporting for long-running tools, on stderr.
//
// When both stdout and stderr are terminals: one line redrawn in place at most 10 times a second
// ("convert 1234/5000 24.7% 850/s ETA 0:00:04"). Otherwise (CI logs, pipes, `> log`) nothing
// until the final line ("convert 5000/5000 100.0% 850/s in 0:00:06"), so logs stay readable.
// --quiet (enabled = false) prints nothing at all. Not thread-safe: call from the thread that
// drives the work.
#ifndef DDPIO_TOOLS_CLI_PROGRESS_H_
#define DDPIO_TOOLS_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace ddpio::tools {

// "h:mm:ss" ("0:00:04", "27:46:40"); negative or non-finite seconds print as "-:--:--".
std::string FormatHms(double seconds);

// The progress line after `done` of `total` (0: unknown) items in `seconds`: with "ETA h:mm:ss"
// while running, "in h:mm:ss" when final.
std::string ProgressLine(const std::string& label, uint64_t done, uint64_t total, double seconds,
                         bool final);

class Progress {
 public:
  // `total` 0 means unknown. `enabled` false prints nothing (e.g. --quiet).
  Progress(std::string label, uint64_t total, bool enabled = true);
  void Update(uint64_t done);
  // Prints the final line (and ends the in-place line on a terminal).
  void Finish(uint64_t done);

 private:
  void Print(uint64_t done, bool final);

  const std::string label_;
  const uint64_t total_;
  const bool enabled_;
  const bool live_;  // stdout and stderr are terminals: redraw in place
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CLI_PROGRESS_H_
