// RateGovernor: how fast one client sends requests to a store, so that a job never overruns it.
// A token bucket whose rate follows AIMD, as TCP's congestion control and the AWS SDKs' adaptive
// retry mode do:
//   - it starts at the cap (`max_per_s`; without one, unlimited until the store pushes back);
//   - a sign of overload (503 SlowDown, 429, an attempt that timed out) halves it, from the rate
//     actually sent when that is lower — at most once per `reaction` interval, so the requests in
//     flight that fail in one burst count as one sign;
//   - each second of successes adds a tenth of the rate it fell from — the rate before the first
//     decrease of a storm of them less than 10 s apart — so it is back within ~10 s, then goes on
//     up as long as the store takes it, up to the cap; never below `min_per_s` (10 a second, or the
//     cap when lower: a store that cannot take that from one client is down, which the retries
//     deal with).
// Retries are charged, not held back: their exponential backoff already paces each one, and the
// governor's job is the load all requests make together.
// Times are the caller's (tests drive it with their own clock). Not thread-safe: the HTTP client
// calls it from its one thread, under its lock.
//
//   RateGovernor g({.max_per_s = 200}, now);
//   if (auto later = g.Admit(now)) { /* wait until *later */ } else { /* send */ }
//   g.Succeeded(now);  g.Throttled(now);
#ifndef DDPIO_STORAGE_S3_RATE_GOVERNOR_H_
#define DDPIO_STORAGE_S3_RATE_GOVERNOR_H_

#include <chrono>
#include <cstdint>
#include <optional>

#include "ddpio/storage/s3/recent_rate.h"

namespace ddpio::storage::s3 {

class RateGovernor {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    double max_per_s = 0;   // the cap, requests a second; 0: none
    double min_per_s = 10;  // the rate never falls below this
    double decrease = 0.5;  // the factor a sign of overload multiplies the rate by
    std::chrono::milliseconds reaction{500};
  };
  RateGovernor(const Options& options, Clock::time_point now);

  // Whether a request may start at `now`: nullopt when it may (its token is taken), else when to
  // ask again.
  std::optional<Clock::time_point> Admit(Clock::time_point now);
  // A retry starting at `now`: not held back (its own backoff paces it), but it spends a token
  // as any request does (down to a second's worth of debt), so new requests wait for it.
  void Charge(Clock::time_point now);
  void Succeeded(Clock::time_point now);
  void Throttled(Clock::time_point now);
  // Another client of the node was pushed back (node_signal.h): the rate falls as for a sign of
  // overload of its own (once per burst), not counted among throttles().
  void PeerThrottled(Clock::time_point now);

  // The rate allowed now, requests a second; 0 while unlimited.
  double rate_per_s() const { return limited_ ? rate_ : 0; }
  // Signs of overload seen, and the decreases they caused.
  uint64_t throttles() const { return throttles_; }
  uint64_t decreases() const { return decreases_; }

 private:
  void Refill(Clock::time_point now);
  // The multiplicative decrease of Throttled and PeerThrottled.
  void Decrease(Clock::time_point now);

  Options options_;
  bool limited_ = false;  // a cap, or a sign of overload seen
  double rate_ = 0;       // while limited_
  double step_ = 0;       // growth a second after a decrease
  double tokens_ = 1;
  Clock::time_point refilled_, grown_, last_decrease_;
  bool decreased_ = false;
  RecentRate sent_;  // the requests started
  uint64_t throttles_ = 0, decreases_ = 0;
};

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_RATE_GOVERNOR_H_
