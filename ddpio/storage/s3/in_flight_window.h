// InFlightWindow: how many requests one client keeps in flight — as many as Little's law says the
// rate it completes them at needs, given how long they take:
//   window = headroom x rate x mean time
//   - rate: requests completed a second over about the last second;
//   - mean time: how long those requests took, start to end;
//   - rate x mean time is the requests actually in flight on average (Little's law), so the
//     window is `headroom` (2) times what was in use. While the window is full — it is what
//     limits the rate — it doubles each second; when the reader asks for less (its decoding is
//     the bound), it settles at twice what that rate needs at the store's latency.
// Never below `min` (the client's max_in_flight) nor above `max`, and above `min` only while the
// responses' mean size times the window stays within `max_bytes`. So a reader of small records
// 30 ms from its store (16 in flight: 533 records a second, however fast it decodes) opens up to
// what its decoding asks for, while whole-chunk GETs of 8 MiB stay at `min`: the window holds
// responses in memory, and one large GET fills a link alone.
// A mean, not a minimum, so that a store whose latency varies (10-50 ms) opens it as one at a
// steady 30 ms does. The price: behind a saturated link requests queue, the window is full and
// it opens to `max` (requests wait longer; the rate is the link's either way, and the request-rate
// governor, not this, keeps a store from being overrun). Without completions (a storm of
// failures) it holds where the last ones left it.
// Times are the caller's (tests drive it with their own clock). Not thread-safe: the HTTP client
// calls it from its one thread.
//
//   InFlightWindow w({.min = 16, .max = 128}, now);
//   w.Completed(started, now, bytes);  // a request that succeeded
//   if (running < w.size(now)) ...     // start another
#ifndef DDPIO_STORAGE_S3_IN_FLIGHT_WINDOW_H_
#define DDPIO_STORAGE_S3_IN_FLIGHT_WINDOW_H_

#include <chrono>
#include <cstdint>

#include "ddpio/storage/s3/recent_rate.h"

namespace ddpio::storage::s3 {

class InFlightWindow {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    int min = 16;
    int max = 128;
    double headroom = 2;
    uint64_t max_bytes = uint64_t{64} << 20;  // responses in flight, by their mean size
  };
  InFlightWindow(const Options& options, Clock::time_point now);

  // A request started at `started` completed at `now`, answered in full with `bytes`.
  void Completed(Clock::time_point started, Clock::time_point now, uint64_t bytes);
  // The requests to keep in flight at `now`.
  int size(Clock::time_point now) const;

 private:
  Options options_;
  RecentRate completed_;  // the requests completed, with their bytes
  RecentRate held_;       // the same, with the nanoseconds each took
};

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_IN_FLIGHT_WINDOW_H_
