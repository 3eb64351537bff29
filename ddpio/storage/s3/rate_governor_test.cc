// The request-rate governor on a clock of the test's own: a cap is kept, a burst of overload signs
// halves the rate once (from what was really sent), successes bring it back to where it fell
// from in about five seconds and never past the cap, and nothing drives it below its floor.
#include "ddpio/storage/s3/rate_governor.h"

#include <chrono>

#include "gtest/gtest.h"

namespace ddpio::storage::s3 {
namespace {

using Clock = RateGovernor::Clock;
using std::chrono::milliseconds;

// Requests sent as fast as the governor allows from `start` for `span`: how many.
uint64_t SendFlatOut(RateGovernor& g, Clock::time_point* now, Clock::duration span) {
  const Clock::time_point end = *now + span;
  uint64_t sent = 0;
  while (*now < end) {
    if (auto later = g.Admit(*now)) {
      *now = std::max(*later, *now + std::chrono::microseconds(1));
    } else {
      ++sent;
      g.Succeeded(*now);
    }
  }
  return sent;
}

// Requests sent one every `every` for `span`, each succeeding: how many were admitted at once.
uint64_t SendEvery(RateGovernor& g, Clock::time_point* now, Clock::duration every,
                   Clock::duration span) {
  uint64_t admitted = 0;
  for (const Clock::time_point end = *now + span; *now < end; *now += every) {
    if (!g.Admit(*now).has_value()) {
      ++admitted;
      g.Succeeded(*now);
    }
  }
  return admitted;
}

TEST(RateGovernor, WithoutACapOrOverloadEveryRequestGoesAtOnce) {
  Clock::time_point now{};
  RateGovernor g({}, now);
  for (int i = 0; i < 10000; ++i) ASSERT_FALSE(g.Admit(now).has_value()) << i;
  EXPECT_EQ(g.rate_per_s(), 0.0) << "unlimited";
}

TEST(RateGovernor, ACapIsKeptOverTime) {
  Clock::time_point now{};
  RateGovernor g({.max_per_s = 100}, now);
  const uint64_t sent = SendFlatOut(g, &now, std::chrono::seconds(10));
  EXPECT_GE(sent, 995u);
  EXPECT_LE(sent, 1006u) << "100 a second for 10 s, and a burst of 5 at most";
  EXPECT_EQ(g.rate_per_s(), 100.0);
}

TEST(RateGovernor, ABurstOfOverloadHalvesTheRateSentOnceThenItGrowsBack) {
  Clock::time_point now{};
  RateGovernor g({}, now);
  // 200 a second for 2 s, unlimited; then the store says SlowDown to 16 requests in flight.
  EXPECT_EQ(SendEvery(g, &now, milliseconds(5), std::chrono::seconds(2)), 400u);
  for (int i = 0; i < 16; ++i) g.Throttled(now + milliseconds(i));
  EXPECT_EQ(g.throttles(), 16u);
  EXPECT_EQ(g.decreases(), 1u) << "one burst, one decrease";
  EXPECT_NEAR(g.rate_per_s(), 100.0, 10.0) << "half of the 200 a second that were sent";
  // Asking for 200 a second now gets about 100 a second.
  now += milliseconds(20);
  const uint64_t next_second = SendEvery(g, &now, milliseconds(5), std::chrono::seconds(1));
  EXPECT_GE(next_second, 95u);
  EXPECT_LE(next_second, 125u);
  // Successes bring it back to where it fell from in about five seconds.
  SendEvery(g, &now, milliseconds(5), std::chrono::seconds(4));
  EXPECT_NEAR(g.rate_per_s(), 200.0, 15.0);
  // A second overload after the reaction interval halves it again.
  g.Throttled(now);
  EXPECT_EQ(g.decreases(), 2u);
  EXPECT_LT(g.rate_per_s(), 120.0);
}

// Another client of the node pushed back (node_signal.h): the rate halves as for its own sign of
// overload, once a burst, and the sign is not counted as this client's.
TEST(RateGovernor, APeersPushBackHalvesTheRateWithoutCountingAsItsOwn) {
  Clock::time_point now{};
  RateGovernor g({}, now);
  EXPECT_EQ(SendEvery(g, &now, milliseconds(5), std::chrono::seconds(2)), 400u);
  g.PeerThrottled(now);
  g.PeerThrottled(now + milliseconds(10));
  EXPECT_EQ(g.throttles(), 0u);
  EXPECT_EQ(g.decreases(), 1u) << "one burst, one decrease";
  EXPECT_NEAR(g.rate_per_s(), 100.0, 10.0);
}

TEST(RateGovernor, GrowthStopsAtTheCapAndOverloadNeverGoesBelowTheFloor) {
  Clock::time_point now{};
  RateGovernor g({.max_per_s = 50, .min_per_s = 2}, now);
  SendFlatOut(g, &now, std::chrono::seconds(1));
  g.Throttled(now);
  EXPECT_LE(g.rate_per_s(), 26.0);
  SendFlatOut(g, &now, std::chrono::seconds(60));
  EXPECT_EQ(g.rate_per_s(), 50.0) << "back to the cap, not past it";
  for (int i = 0; i < 40; ++i) {
    now += milliseconds(600);
    g.Throttled(now);
  }
  EXPECT_EQ(g.rate_per_s(), 2.0) << "the floor";
  EXPECT_EQ(g.decreases(), 41u);
}

TEST(RateGovernor, RetriesAreChargedNotHeldBackAndNewRequestsWaitForThem) {
  Clock::time_point now{};
  RateGovernor g({.max_per_s = 10}, now);
  EXPECT_FALSE(g.Admit(now).has_value());
  for (int i = 0; i < 5; ++i) g.Charge(now);  // five retries at once: none waits
  const auto later = g.Admit(now);
  ASSERT_TRUE(later.has_value());
  EXPECT_GE(*later - now, milliseconds(550)) << "the retries' tokens are owed first";
  for (int i = 0; i < 100; ++i) g.Charge(now);
  EXPECT_LE(*g.Admit(now) - now, milliseconds(2100)) << "at most a second of debt";
}

TEST(RateGovernor, ACapBelowTheFloorIsKept) {
  Clock::time_point now{};
  RateGovernor g({.max_per_s = 4}, now);  // a job's 1,000/s over 256 readers: 3.9 each
  const uint64_t sent = SendFlatOut(g, &now, std::chrono::seconds(10));
  EXPECT_GE(sent, 39u);
  EXPECT_LE(sent, 42u);
  g.Throttled(now);
  EXPECT_LE(g.rate_per_s(), 4.0) << "overload never lifts it above the cap";
}

TEST(RateGovernor, AStormOfOverloadIsRecoveredFromWithinSecondsNotMinutes) {
  Clock::time_point now{};
  RateGovernor g({}, now);
  SendEvery(g, &now, milliseconds(1), std::chrono::seconds(2));  // 1,000 a second
  for (int i = 0; i < 7; ++i) {  // 503s for 4 s: halved again and again
    g.Throttled(now);
    now += milliseconds(600);
  }
  EXPECT_EQ(g.decreases(), 7u);
  EXPECT_LT(g.rate_per_s(), 50.0);
  SendFlatOut(g, &now, std::chrono::seconds(11));
  EXPECT_GT(g.rate_per_s(), 900.0) << "the storm's first rate sets the growth";
}

}  // namespace
}  // namespace ddpio::storage::s3
