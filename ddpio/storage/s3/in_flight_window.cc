#include "ddpio/storage/s3/in_flight_window.h"

#include <algorithm>
#include <cmath>

namespace ddpio::storage::s3 {
namespace {

using Seconds = std::chrono::duration<double>;
constexpr std::chrono::seconds kShortestSpan(10);

}  // namespace

InFlightWindow::InFlightWindow(const Options& options, Clock::time_point now)
    : options_(options), completed_(now), span_start_(now) {
  options_.min = std::max(1, options_.min);
  options_.max = std::max(options_.min, options_.max);
}

void InFlightWindow::Completed(Clock::time_point started, Clock::time_point now, uint64_t bytes) {
  completed_.Add(now, bytes);
  if (now - span_start_ >= kShortestSpan) {
    last_shortest_ = now - span_start_ >= 2 * kShortestSpan ? Clock::duration::max() : shortest_;
    shortest_ = Clock::duration::max();
    span_start_ = now;
  }
  shortest_ = std::min(shortest_, std::max(Clock::duration::zero(), now - started));
}

int InFlightWindow::size(Clock::time_point now) const {
  if (options_.max == options_.min) return options_.min;
  const double rate = completed_.per_s(now);
  const Clock::duration shortest = std::min(shortest_, last_shortest_);
  if (shortest == Clock::duration::max()) return options_.min;
  double wanted = std::ceil(options_.headroom * rate * Seconds(shortest).count());
  const uint64_t done = completed_.events();
  const double mean_bytes = done > 0 ? static_cast<double>(completed_.value()) / done : 0;
  if (mean_bytes > 0) wanted = std::min(wanted, std::floor(options_.max_bytes / mean_bytes));
  return static_cast<int>(std::clamp<double>(wanted, options_.min, options_.max));
}

}  // namespace ddpio::storage::s3
