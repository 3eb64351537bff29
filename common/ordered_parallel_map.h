// OrderedParallelMap: runs fn(i) for i in [begin, end) on N threads and hands the results back
// in index order, with at most `window` results in flight (bounded memory).
//
// Used where work is parallel but output must be sequential: the converter (read and validate
// files on many threads, one writer in index order) and inspect --verify. Next() and the
// destructor may be called from one consumer thread; the destructor cancels outstanding work
// and joins the workers, so abandoning a map midway neither leaks threads nor hangs. `fn` must
// not throw; errors travel inside T (e.g. absl::StatusOr).
//
//   OrderedParallelMap<absl::StatusOr<Item>> map(0, n, threads, 4 * threads,
//                                                [&](uint64_t i, int worker) { return Load(i); });
//   while (auto item = map.Next()) { ... }
#ifndef DDPIO_COMMON_ORDERED_PARALLEL_MAP_H_
#define DDPIO_COMMON_ORDERED_PARALLEL_MAP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace ddpio {

template <typename T>
class OrderedParallelMap {
 public:
  using Fn = std::function<T(uint64_t index, int worker)>;

  OrderedParallelMap(uint64_t begin, uint64_t end, int threads, uint64_t window, Fn fn)
      : end_(end), window_(window < 1 ? 1 : window), fn_(std::move(fn)), next_claim_(begin),
        next_deliver_(begin) {
    if (threads < 1) threads = 1;
    workers_.reserve(threads);
    for (int w = 0; w < threads; ++w) workers_.emplace_back([this, w] { Work(w); });
  }

  ~OrderedParallelMap() {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    for (auto& t : workers_) t.join();
  }

  OrderedParallelMap(const OrderedParallelMap&) = delete;
  OrderedParallelMap& operator=(const OrderedParallelMap&) = delete;

  // The next result in index order, blocking until it is ready; nullopt after the last one.
  std::optional<T> Next() {
    absl::MutexLock lock(&mu_);
    if (next_deliver_ >= end_) return std::nullopt;
    const uint64_t want = next_deliver_;
    mu_.Await(absl::Condition(this, &OrderedParallelMap::NextReady));
    auto node = ready_.extract(want);
    ++next_deliver_;
    return std::optional<T>(std::move(node.mapped()));
  }

 private:
  bool NextReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ready_.count(next_deliver_) > 0;
  }

  bool CanClaim() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || next_claim_ >= end_ || next_claim_ < next_deliver_ + window_;
  }

  void Work(int worker) {
    for (;;) {
      uint64_t index;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &OrderedParallelMap::CanClaim));
        if (cancelled_ || next_claim_ >= end_) return;
        index = next_claim_++;
      }
      T result = fn_(index, worker);
      absl::MutexLock lock(&mu_);
      ready_.emplace(index, std::move(result));
    }
  }

  // Constant after construction.
  const uint64_t end_;
  const uint64_t window_;
  const Fn fn_;

  absl::Mutex mu_;
  uint64_t next_claim_ ABSL_GUARDED_BY(mu_);
  uint64_t next_deliver_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, T> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace ddpio

#endif  // DDPIO_COMMON_ORDERED_PARALLEL_MAP_H_
