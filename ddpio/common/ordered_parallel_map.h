// OrderedParallelMap: runs fn(i) for i in [begin, end) on N threads and hands the results back
// in index order, with at most `window` results in flight (bounded memory).
//
// Used where work is parallel but output must be sequential: the converter (read and validate
// files on many threads, one writer in index order), inspect and synth. Next() and the
// destructor are called from one consumer thread; the destructor cancels outstanding work and
// joins the workers, so abandoning a map midway neither leaks threads nor hangs. `fn` must not
// throw; errors travel inside T (e.g. absl::StatusOr).
//
// `drained` (optional) is called by each worker that finds no index left to claim, once, before
// it exits (not when the map is being destroyed): the loader lets such a worker help finish the
// batches other workers are still assembling. It may run as long as it likes; the destructor
// joins it, so it must return once whatever it waits for is cancelled by its owner.
//
// Locking uses std::mutex rather than absl::Mutex: Debian's Abseil is not built with
// ThreadSanitizer, so TSan cannot see absl::Mutex's synchronisation and reports false races.
//
//   OrderedParallelMap<absl::StatusOr<Item>> map(0, n, threads, 4 * threads,
//                                                [&](uint64_t i, int worker) { return Load(i); });
//   while (auto item = map.Next()) { ... }
#ifndef DDPIO_COMMON_ORDERED_PARALLEL_MAP_H_
#define DDPIO_COMMON_ORDERED_PARALLEL_MAP_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace ddpio {

template <typename T>
class OrderedParallelMap {
 public:
  using Fn = std::function<T(uint64_t index, int worker)>;
  using Drained = std::function<void(int worker)>;

  OrderedParallelMap(uint64_t begin, uint64_t end, int threads, uint64_t window, Fn fn,
                     Drained drained = nullptr)
      : end_(end),
        window_(window < 1 ? 1 : window),
        fn_(std::move(fn)),
        drained_(std::move(drained)),
        next_claim_(begin),
        next_deliver_(begin) {
    if (threads < 1) threads = 1;
    workers_.reserve(threads);
    for (int w = 0; w < threads; ++w) workers_.emplace_back([this, w] { Work(w); });
  }

  ~OrderedParallelMap() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    can_claim_.notify_all();
    for (auto& t : workers_) t.join();
  }

  OrderedParallelMap(const OrderedParallelMap&) = delete;
  OrderedParallelMap& operator=(const OrderedParallelMap&) = delete;

  // Whether Next() would return at once (the next result is ready, or none is left), waiting up
  // to `timeout` for it. Consumes nothing: a caller that must stay responsive (to a signal, say)
  // waits in slices.
  bool WaitReady(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return ready_cv_.wait_for(
        lock, timeout, [this] { return next_deliver_ >= end_ || ready_.count(next_deliver_) > 0; });
  }

  // The next result in index order, blocking until it is ready; nullopt after the last one.
  std::optional<T> Next() {
    std::unique_lock<std::mutex> lock(mu_);
    if (next_deliver_ >= end_) return std::nullopt;
    ready_cv_.wait(lock, [this] { return ready_.count(next_deliver_) > 0; });
    auto node = ready_.extract(next_deliver_);
    ++next_deliver_;
    lock.unlock();
    can_claim_.notify_all();  // the window moved
    return std::optional<T>(std::move(node.mapped()));
  }

 private:
  void Work(int worker) {
    for (;;) {
      uint64_t index;
      {
        std::unique_lock<std::mutex> lock(mu_);
        can_claim_.wait(lock, [this] {
          return cancelled_ || next_claim_ >= end_ || next_claim_ < next_deliver_ + window_;
        });
        if (cancelled_) return;
        if (next_claim_ >= end_) {
          lock.unlock();
          if (drained_) drained_(worker);
          return;
        }
        index = next_claim_++;
      }
      T result = fn_(index, worker);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_.emplace(index, std::move(result));
      }
      ready_cv_.notify_all();
    }
  }

  // Constant after construction.
  const uint64_t end_;
  const uint64_t window_;
  const Fn fn_;
  const Drained drained_;

  std::mutex mu_;
  std::condition_variable can_claim_;  // a worker may claim the next index
  std::condition_variable ready_cv_;   // a result was added
  uint64_t next_claim_;                // guarded by mu_
  uint64_t next_deliver_;              // guarded by mu_
  bool cancelled_ = false;             // guarded by mu_
  std::map<uint64_t, T> ready_;        // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace ddpio

#endif  // DDPIO_COMMON_ORDERED_PARALLEL_MAP_H_
