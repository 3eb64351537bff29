#include "tools/cli_progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddpio::tools {

std::string FormatHms(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) return "-:--:--";
  const auto s = static_cast<uint64_t>(std::llround(seconds));
  return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
}

std::string ProgressLine(const std::string& label, uint64_t done, uint64_t total, double seconds,
                         bool final) {
  const double rate = seconds > 0 ? done / seconds : 0;
  std::string line = absl::StrFormat("%s %d", label, done);
  if (total > 0) absl::StrAppendFormat(&line, "/%d %5.1f%%", total, 100.0 * done / total);
  absl::StrAppendFormat(&line, " %.0f/s", rate);
  if (final) {
    absl::StrAppend(&line, " in ", FormatHms(seconds));
  } else if (total > 0 && rate > 0 && done <= total) {
    absl::StrAppend(&line, " ETA ", FormatHms((total - done) / rate));
  }
  return line;
}

Progress::Progress(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      live_(isatty(STDERR_FILENO) == 1 && isatty(STDOUT_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::Update(uint64_t done) {
  if (!enabled_ || !live_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  Print(done, false);
}

void Progress::Finish(uint64_t done) {
  if (!enabled_) return;
  Print(done, true);
}

void Progress::Print(uint64_t done, bool final) {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string line = ProgressLine(label_, done, total_, secs, final);
  if (live_) {
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace ddpio::tools
