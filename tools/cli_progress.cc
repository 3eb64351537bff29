#include "tools/cli_progress.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_format.h"

namespace ddpio::tools {

Progress::Progress(std::string label, uint64_t total, bool enabled, std::chrono::seconds interval)
    : label_(std::move(label)), total_(total), enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1),
      interval_(interval), start_(std::chrono::steady_clock::now()), last_(start_) {}

void Progress::Update(uint64_t done) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  auto gap = tty_ ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::milliseconds(100))
                  : std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval_);
  if (now - last_ < gap) return;
  last_ = now;
  Print(done, false);
}

void Progress::Finish(uint64_t done) {
  if (!enabled_) return;
  Print(done, true);
}

void Progress::Print(uint64_t done, bool final) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = secs > 0 ? done / secs : 0;
  std::string line = absl::StrFormat("%s %d", label_, done);
  if (total_ > 0) {
    absl::StrAppendFormat(&line, "/%d %5.1f%%", total_, 100.0 * done / total_);
  }
  absl::StrAppendFormat(&line, " %.0f/s", rate);
  if (final) {
    absl::StrAppendFormat(&line, " in %.1fs", secs);
  } else if (total_ > 0 && rate > 0) {
    absl::StrAppendFormat(&line, " ETA %.0fs", (total_ - done) / rate);
  }
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace ddpio::tools
