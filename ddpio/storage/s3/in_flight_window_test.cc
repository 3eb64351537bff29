// The in-flight window on a clock of the test's own, against a simulated store: each request
// answers `latency` (plus up to `jitter`, drawn by a fixed generator) after it starts, at most
// `per_s` a second (a FIFO server), for a reader that asks for at most `demand` a second. The
// window opens when the latency is what limits the rate, steady or not, settles at twice what
// the reader asks for, and stays shut for large responses.
#include "ddpio/storage/s3/in_flight_window.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "gtest/gtest.h"

namespace ddpio::storage::s3 {
namespace {

using Clock = InFlightWindow::Clock;
using std::chrono::milliseconds;

struct Outcome {
  double completed_per_s = 0;  // over the last second
  int window = 0;              // at the end
};

// Drives `w` for `span` in steps of 0.1 ms: requests start while fewer than the window are in
// flight and the reader's demand allows; each completes `latency` after it starts, or after the
// one before it plus 1 / per_s, whichever is later.
Outcome Simulate(InFlightWindow& w, Clock::time_point* now, Clock::duration span,
                 Clock::duration latency, double per_s, double demand, uint64_t bytes,
                 Clock::duration jitter = Clock::duration::zero()) {
  uint64_t seed = 88172645463325252ull;  // xorshift64: the same draws every run
  const auto step = std::chrono::microseconds(100);
  const auto service = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(per_s > 0 ? 1.0 / per_s : 0.0));
  const auto asked_every = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(demand > 0 ? 1.0 / demand : 0.0));
  // When each request in flight completes, and when it started: requests on connections of their
  // own complete in any order (a server with a rate, per_s, answers in order).
  std::multimap<Clock::time_point, Clock::time_point> flying;
  Clock::time_point last_done = *now, next_ask = *now;
  const Clock::time_point end = *now + span;
  uint64_t completed_last_second = 0;
  for (; *now < end; *now += step) {
    while (!flying.empty() && flying.begin()->first <= *now) {
      w.Completed(flying.begin()->second, flying.begin()->first, bytes);
      if (end - *now <= std::chrono::seconds(1)) ++completed_last_second;
      flying.erase(flying.begin());
    }
    while (static_cast<int>(flying.size()) < w.size(*now) && next_ask <= *now) {
      seed ^= seed << 13;
      seed ^= seed >> 7;
      seed ^= seed << 17;
      const auto extra =
          jitter.count() > 0
              ? Clock::duration(static_cast<int64_t>(seed % static_cast<uint64_t>(jitter.count())))
              : Clock::duration::zero();
      const Clock::time_point done = per_s > 0
                                         ? std::max(*now + latency + extra, last_done + service)
                                         : *now + latency + extra;
      flying.emplace(done, *now);
      last_done = done;
      next_ask = demand > 0 ? next_ask + asked_every : *now;
    }
  }
  return {static_cast<double>(completed_last_second), w.size(*now)};
}

TEST(InFlightWindow, AStoreFarAwayOpensTheWindowToItsLimit) {
  Clock::time_point now{};
  InFlightWindow w({.min = 16, .max = 128}, now);
  const Outcome first = Simulate(w, &now, milliseconds(500), milliseconds(30), 0, 0, 100'000);
  EXPECT_NEAR(first.completed_per_s, 16 / 0.030 / 2, 30) << "half a second at 16 in flight";
  const Outcome later = Simulate(w, &now, std::chrono::seconds(6), milliseconds(30), 0, 0, 100'000);
  EXPECT_EQ(later.window, 128);
  EXPECT_NEAR(later.completed_per_s, 128 / 0.030, 200) << "8x the rate 16 in flight allow";
}

TEST(InFlightWindow, AStoreWhoseLatencyVariesOpensItAsASteadyOneDoes) {
  // 10-50 ms to the first byte, 30 on average: 16 in flight allow ~533 a second.
  Clock::time_point now{};
  InFlightWindow w({.min = 16, .max = 128}, now);
  const Outcome run =
      Simulate(w, &now, std::chrono::seconds(6), milliseconds(10), 0, 0, 100'000, milliseconds(40));
  EXPECT_EQ(run.window, 128);
  EXPECT_GT(run.completed_per_s, 3000) << "about 128 / 0.030";
  InFlightWindow asked({.min = 16, .max = 128}, now);
  const Outcome demand = Simulate(asked, &now, std::chrono::seconds(8), milliseconds(10), 0, 1600,
                                  100'000, milliseconds(40));
  EXPECT_NEAR(demand.completed_per_s, 1600, 40) << "the demand met";
  EXPECT_GE(demand.window, 1600 * 0.030 * 1.5) << "room for the demand at the mean latency";
}

TEST(InFlightWindow, ASaturatedStoreOpensItToItsLimitAndNoFurther) {
  // 1,000 answers a second at most: the requests queue, the window stays full and opens to its
  // limit; the rate is the store's either way.
  Clock::time_point now{};
  InFlightWindow w({.min = 16, .max = 128}, now);
  const Outcome run =
      Simulate(w, &now, std::chrono::seconds(6), milliseconds(30), 1000, 0, 100'000);
  EXPECT_EQ(run.window, 128);
  EXPECT_NEAR(run.completed_per_s, 1000, 20);
}

TEST(InFlightWindow, TheWindowSettlesAtTwiceWhatTheReaderAsksFor) {
  Clock::time_point now{};
  InFlightWindow w({.min = 16, .max = 128}, now);
  const Outcome run =
      Simulate(w, &now, std::chrono::seconds(8), milliseconds(30), 0, 1600, 100'000);
  EXPECT_NEAR(run.completed_per_s, 1600, 40) << "the demand met";
  EXPECT_GE(run.window, 2 * 1600 * 0.030 - 4);  // 96
  EXPECT_LE(run.window, 2 * 1600 * 0.030 + 4);
}

TEST(InFlightWindow, ANearbyStoreKeepsTheWindowAtItsFloor) {
  Clock::time_point now{};
  InFlightWindow w({.min = 16, .max = 128}, now);
  const Outcome run = Simulate(w, &now, std::chrono::seconds(5), milliseconds(1), 0, 2000, 100'000);
  EXPECT_EQ(run.window, 16) << "2 x 2,000/s x 1 ms = 4: the floor";
}

TEST(InFlightWindow, LargeResponsesKeepTheWindowAtItsFloor) {
  Clock::time_point now{};
  InFlightWindow w({.min = 16, .max = 128}, now);
  const Outcome run = Simulate(w, &now, std::chrono::seconds(5), milliseconds(30), 0, 0, 8 << 20);
  EXPECT_EQ(run.window, 16) << "64 MiB of 8 MiB responses is 8: the floor";
  InFlightWindow mid({.min = 16, .max = 128}, now);
  const Outcome two = Simulate(mid, &now, std::chrono::seconds(6), milliseconds(30), 0, 0, 1 << 20);
  EXPECT_EQ(two.window, 64) << "64 MiB of 1 MiB responses";
}

TEST(InFlightWindow, AFixedWindowNeverMoves) {
  Clock::time_point now{};
  InFlightWindow w({.min = 16, .max = 16}, now);
  const Outcome run = Simulate(w, &now, std::chrono::seconds(3), milliseconds(30), 0, 0, 1000);
  EXPECT_EQ(run.window, 16);
  EXPECT_NEAR(run.completed_per_s, 16 / 0.030, 20);
}

}  // namespace
}  // namespace ddpio::storage::s3
