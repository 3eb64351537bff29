// RecentRate: how many events a second there were lately — those of the last whole second and of
// the current part one, over their length — and the sum of a value each carries (bytes, say).
// Seconds roll over as events come: an event after a quiet second starts afresh, while without
// events the rate stays what the last ones left, over at most three seconds. Times are the
// caller's. Not thread-safe. Used by the request-rate governor (the rate sent) and the in-flight
// window (the rate completed, and the responses' mean size).
#ifndef DDPIO_STORAGE_S3_RECENT_RATE_H_
#define DDPIO_STORAGE_S3_RECENT_RATE_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace ddpio::storage::s3 {

class RecentRate {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kSecond{1};

  explicit RecentRate(Clock::time_point now) : start_(now) {}

  // An event at `now` carrying `value`.
  void Add(Clock::time_point now, uint64_t value = 0) {
    if (now - start_ >= kSecond) {
      const bool quiet = now - start_ >= 2 * kSecond;  // the second before `now` had nothing
      last_ = quiet ? 0 : current_;
      last_value_ = quiet ? 0 : current_value_;
      current_ = 0;
      current_value_ = 0;
      start_ = now;
    }
    ++current_;
    current_value_ += value;
  }

  // Events a second at `now`.
  double per_s(Clock::time_point now) const {
    const double part = std::min(std::chrono::duration<double>(now - start_).count(), 2.0);
    return static_cast<double>(last_ + current_) / (1.0 + part);
  }
  // The events the rate counts, and the sum of their values.
  uint64_t events() const { return last_ + current_; }
  uint64_t value() const { return last_value_ + current_value_; }

 private:
  Clock::time_point start_;  // of the current second
  uint64_t current_ = 0, last_ = 0;
  uint64_t current_value_ = 0, last_value_ = 0;
};

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_RECENT_RATE_H_
