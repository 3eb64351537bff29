#include "ddpio/common/ordered_parallel_map.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "gtest/gtest.h"

namespace ddpio {
namespace {

TEST(OrderedParallelMap, DeliversEveryIndexInOrderForAnyThreadCount) {
  for (int threads : {1, 2, 4, 8}) {
    // Later indices finish first (they do less work), so ordering is really exercised.
    OrderedParallelMap<uint64_t> map(10, 210, threads, 16, [](uint64_t i, int) {
      volatile uint64_t spin = 0;
      for (uint64_t k = 0; k < (210 - i) * 200; ++k) spin = spin + k;
      return i * i;
    });
    for (uint64_t i = 10; i < 210; ++i) {
      auto v = map.Next();
      ASSERT_TRUE(v.has_value());
      EXPECT_EQ(*v, i * i) << "threads=" << threads;
    }
    EXPECT_FALSE(map.Next().has_value());
  }
}

TEST(OrderedParallelMap, NeverRunsAheadOfTheWindow) {
  std::atomic<uint64_t> max_started{0};
  const uint64_t window = 5;
  OrderedParallelMap<int> map(0, 100, 4, window, [&](uint64_t i, int) {
    uint64_t seen = max_started.load();
    while (i > seen && !max_started.compare_exchange_weak(seen, i)) {
    }
    return 0;
  });
  for (uint64_t delivered = 0; delivered < 100; ++delivered) {
    // Before the consumer takes result `delivered`, no index >= delivered + window has started.
    EXPECT_LT(max_started.load(), delivered + window);
    ASSERT_TRUE(map.Next().has_value());
  }
}

TEST(OrderedParallelMap, AbandoningMidwayJoinsWithoutHanging) {
  std::atomic<int> calls{0};
  {
    OrderedParallelMap<int> map(0, 1000000, 3, 8, [&](uint64_t, int) { return ++calls; });
    ASSERT_TRUE(map.Next().has_value());
  }  // destructor cancels the remaining ~million items
  EXPECT_LT(calls.load(), 1000);
}

TEST(OrderedParallelMap, AWorkerWithNothingLeftIsToldWhileOthersStillWork) {
  // Index 0 finishes only once a worker has been told there is nothing left to claim: a map that
  // told its workers only after every result was in would fail this wait.
  std::mutex mu;
  std::condition_variable cv;
  std::multiset<int> drained;
  bool told_in_time = false;
  {
    OrderedParallelMap<int> map(
        0, 2, 2, 4,
        [&](uint64_t i, int) {
          if (i == 0) {
            std::unique_lock<std::mutex> lock(mu);
            told_in_time =
                cv.wait_for(lock, std::chrono::seconds(20), [&] { return !drained.empty(); });
          }
          return static_cast<int>(i);
        },
        [&](int worker) {
          {
            std::lock_guard<std::mutex> lock(mu);
            drained.insert(worker);
          }
          cv.notify_all();
        });
    EXPECT_EQ(map.Next(), 0);
    EXPECT_EQ(map.Next(), 1);
    EXPECT_FALSE(map.Next().has_value());
  }  // joins both workers
  EXPECT_TRUE(told_in_time);
  // The worker on index 0 is told too unless the map was destroyed before it looked again (a
  // cancelled map tells no one); no worker is told twice.
  ASSERT_GE(drained.size(), 1u);
  for (int w : {0, 1}) EXPECT_LE(drained.count(w), 1u) << "worker " << w;
}

TEST(OrderedParallelMap, ACancelledMapTellsNoWorkerItIsDrained) {
  std::atomic<int> drained{0};
  {
    OrderedParallelMap<int> map(
        0, 1000000, 3, 8, [](uint64_t, int) { return 0; }, [&](int) { ++drained; });
    ASSERT_TRUE(map.Next().has_value());
  }
  EXPECT_EQ(drained.load(), 0);
}

TEST(OrderedParallelMap, EmptyRange) {
  OrderedParallelMap<int> map(5, 5, 2, 4, [](uint64_t, int) { return 1; });
  EXPECT_FALSE(map.Next().has_value());
}

}  // namespace
}  // namespace ddpio
