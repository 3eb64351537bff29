// FeedWindow: the bounded hand-over between the thread that moves a group's messages (a peer's
// receiver, or the leader's reader for its own share) and the threads that consume them (the
// loader's workers fetching a batch by step, or the consumer taking decoded batches in order).
//
// The producer pushes one run's messages in step order and blocks while `capacity` of them wait
// unconsumed (so a leader can be at most that far ahead of its slowest peer); consumers take
// any step and block until it is there. A run ends with End() (no more messages), SetError()
// (the first error; consumers get it once the messages before it are taken) or Drain() (the
// consumer side stopped: pushes are discarded so the producer can run to the end of the run).
// Thread-safe.
#ifndef DDPIO_BROADCAST_FEED_WINDOW_H_
#define DDPIO_BROADCAST_FEED_WINDOW_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/feed_message.h"
#include "ddpio/loader/record_source.h"

namespace ddpio::broadcast {

struct FeedItem {
  FeedHeader header;
  std::vector<uint8_t> payload;     // host memory
  std::shared_ptr<uint8_t> device;  // or: the payload in device memory (a group over NCCL)
};

class FeedWindow : public loader::RecordSource {
 public:
  // `name` is what errors call the producer (e.g. "the leader, rank 0").
  FeedWindow(std::string name, size_t capacity) : name_(std::move(name)), capacity_(capacity) {}

  // Starts a new run (epoch): forgets everything of the last one.
  void Reset(uint64_t epoch);

  // Producer side.
  void Push(FeedItem item);
  void End();
  void SetError(const absl::Status& status);

  // Consumer side. Take: the message of `step` (removed from the window); the error once set;
  // DataLoss when the run ended without that step (the producer is out of step); Cancelled
  // once `stop` is set (Wake() makes a waiting Take look).
  absl::StatusOr<FeedItem> Take(uint64_t step, const std::atomic<bool>& stop);
  // Whether Take(step) would return at once, waiting up to `timeout`; takes nothing.
  bool WaitReady(uint64_t step, std::chrono::milliseconds timeout);
  void Drain();
  // The error set by the producer, if any.
  absl::Status error();

  // RecordSource for encoded messages: the records of batch `step` (from Take).
  absl::StatusOr<std::shared_ptr<const loader::SourcedBatch>> Fetch(
      uint64_t epoch, uint64_t step, const std::atomic<bool>& stop) override;
  void Wake() override;
  std::string name() const override { return name_; }

  // Buffers of consumed messages come back for the next message (no allocation per batch; the
  // batches Fetch returns give theirs back when the loader lets go of them, so the window must
  // outlive them).
  void Recycle(std::vector<uint8_t> buffer);
  std::vector<uint8_t> SpareBuffer();

 private:
  const std::string name_;
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t epoch_ = 0;
  std::map<uint64_t, FeedItem> items_;
  bool ended_ = false;
  bool draining_ = false;
  absl::Status error_;
  std::vector<std::vector<uint8_t>> spare_;
};

// The records of an encoded message as a loader batch (spans into the moved payload).
absl::StatusOr<std::unique_ptr<loader::SourcedBatch>> ToSourcedBatch(FeedItem item);

}  // namespace ddpio::broadcast

#endif  // DDPIO_BROADCAST_FEED_WINDOW_H_
