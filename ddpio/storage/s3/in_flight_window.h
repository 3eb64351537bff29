// InFlightWindow: how many requests one client keeps in flight — as many as Little's law says the
// rate it completes them at needs, given how long one takes when nothing queues:
//   window = headroom x rate x shortest
//   - rate: requests completed a second over about the last second;
//   - shortest: the shortest time a request took, start to end, over about the last 10 s — the
//     store's first-byte latency plus one transfer, without queueing (as BBR takes the minimum
//     round trip: a window too large for the link makes requests wait, not the minimum grow);
//   - headroom 2: while the window is what limits the rate (rate = window / time taken), the
//     window doubles each second, until the store, the link or the reader's demand limits the
//     rate instead; then it holds at twice what the rate needs.
// Never below `min` (the client's max_in_flight: what it kept before) nor above `max`, and
// above `min` only while the responses' mean size times the window stays within `max_bytes`. So a
// reader of small records 30 ms from its store (16 in flight: 533 records a second, however fast
// it decodes) opens up to what its decoding asks for, while whole-chunk GETs of 8 MiB stay at
// `min`: the window holds responses in memory, and one large GET fills a link alone.
// The minimum time does not see queueing it causes itself: behind a saturated link the window may
// open to `max` (requests wait longer; the rate is the link's either way, and the request-rate
// governor, not this, keeps a store from being overrun).
// Times are the caller's (tests drive it with their own clock). Not thread-safe: the HTTP client
// calls it from its one thread.
//
//   InFlightWindow w({.min = 16, .max = 128}, now);
//   w.Completed(started, now);      // a request that succeeded
//   if (running < w.size(now)) ...  // start another
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
  // The shortest request of the current 10 s and of the 10 s before (the minimum's age).
  Clock::time_point span_start_;
  Clock::duration shortest_ = Clock::duration::max(), last_shortest_ = Clock::duration::max();
};

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_IN_FLIGHT_WINDOW_H_
