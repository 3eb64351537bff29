// HoldGate: bounds the batches a consumer holds at once (Loader::NextHeld, GroupFeeder::NextHeld).
// Acquire() before handing a batch out, Release() when its hold is dropped (from any thread).
// Thread-safe; shared (std::shared_ptr) by the producer and the holds, which may outlive it.
#ifndef DDPIO_LOADER_HOLD_GATE_H_
#define DDPIO_LOADER_HOLD_GATE_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace ddpio::loader {

// The payload that marks Acquire's error: nothing was consumed, so the caller may retry once a
// batch is released (IsHeldLimit).
inline constexpr char kHeldLimitPayload[] = "ddpio/held-limit";
inline bool IsHeldLimit(const absl::Status& status) {
  return absl::IsResourceExhausted(status) && status.GetPayload(kHeldLimitPayload).has_value();
}

class HoldGate {
 public:
  explicit HoldGate(int limit) : limit_(limit) {}

  // Takes one of the `limit` holds, waiting up to `timeout` for one to be released; then
  // ResourceExhausted naming `what` (the dataset or source) and the limit, marked IsHeldLimit.
  absl::Status Acquire(std::chrono::milliseconds timeout, const std::string& what) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!released_.wait_for(lock, timeout, [&] { return held_ < limit_; })) {
      absl::Status st = absl::ResourceExhaustedError(absl::StrCat(
          held_, " batches (from ", what,
          ") are still held by the consumer, the most allowed (held_batches = ", limit_,
          "); waited ", timeout.count(),
          " ms for one to be released. Let go of a batch before asking for the next, or allow ",
          "more (held_batches; each costs one batch of memory)"));
      st.SetPayload(kHeldLimitPayload, absl::Cord("1"));
      return st;
    }
    ++held_;
    return absl::OkStatus();
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    --held_;
    released_.notify_all();
  }
  int held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

 private:
  const int limit_;
  mutable std::mutex mu_;
  std::condition_variable released_;
  int held_ = 0;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_HOLD_GATE_H_
