#include "ddpio/storage/s3/in_flight_window.h"

#include <algorithm>
#include <cmath>

namespace ddpio::storage::s3 {

InFlightWindow::InFlightWindow(const Options& options, Clock::time_point now)
    : options_(options), completed_(now), held_(now) {
  options_.min = std::max(1, options_.min);
  options_.max = std::max(options_.min, options_.max);
}

void InFlightWindow::Completed(Clock::time_point started, Clock::time_point now, uint64_t bytes) {
  completed_.Add(now, bytes);
  const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(now - started).count();
  held_.Add(now, static_cast<uint64_t>(std::max<int64_t>(0, took)));
}

int InFlightWindow::size(Clock::time_point now) const {
  const uint64_t done = completed_.events();
  if (options_.max == options_.min || done == 0) return options_.min;
  // Little's law: the requests in flight on average were rate x mean time.
  const double mean_s = static_cast<double>(held_.value()) / static_cast<double>(done) / 1e9;
  double wanted = std::ceil(options_.headroom * completed_.per_s(now) * mean_s);
  const double mean_bytes = static_cast<double>(completed_.value()) / static_cast<double>(done);
  if (mean_bytes > 0) wanted = std::min(wanted, std::floor(options_.max_bytes / mean_bytes));
  return static_cast<int>(std::clamp<double>(wanted, options_.min, options_.max));
}

}  // namespace ddpio::storage::s3
