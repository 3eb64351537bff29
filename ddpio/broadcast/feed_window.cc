#include "ddpio/broadcast/feed_window.h"

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast {

void FeedWindow::Reset(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  epoch_ = epoch;
  for (auto& [step, item] : items_) spare_.push_back(std::move(item.payload));
  items_.clear();
  ended_ = false;
  draining_ = false;
  error_ = absl::OkStatus();
}

void FeedWindow::Push(FeedItem item) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return items_.size() < capacity_ || draining_; });
  if (draining_) {
    spare_.push_back(std::move(item.payload));
    return;
  }
  const uint64_t step = item.header.step;
  items_.insert_or_assign(step, std::move(item));
  changed_.notify_all();
}

void FeedWindow::End() {
  std::lock_guard<std::mutex> lock(mu_);
  ended_ = true;
  changed_.notify_all();
}

void FeedWindow::SetError(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = status;
  changed_.notify_all();
}

void FeedWindow::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
  for (auto& [step, item] : items_) spare_.push_back(std::move(item.payload));
  items_.clear();
  changed_.notify_all();
}

absl::Status FeedWindow::error() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void FeedWindow::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  changed_.notify_all();
}

bool FeedWindow::WaitReady(uint64_t step, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(
      lock, timeout, [&] { return items_.count(step) > 0 || !error_.ok() || ended_ || draining_; });
}

absl::StatusOr<FeedItem> FeedWindow::Take(uint64_t step, const std::atomic<bool>& stop) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(
      lock, [&] { return items_.count(step) > 0 || !error_.ok() || ended_ || draining_ || stop; });
  auto it = items_.find(step);
  if (it != items_.end()) {
    FeedItem item = std::move(it->second);
    items_.erase(it);
    changed_.notify_all();  // room for the producer
    return item;
  }
  if (!error_.ok()) return error_;
  if (ended_) {
    return absl::DataLossError(absl::StrCat("out of step with ", name_, ": it ended epoch ", epoch_,
                                            " without sending batch ", step,
                                            " this rank's sampler expects"));
  }
  return absl::CancelledError("feeder stopped");
}

absl::StatusOr<std::shared_ptr<const loader::SourcedBatch>> FeedWindow::Fetch(
    uint64_t epoch, uint64_t step, const std::atomic<bool>& stop) {
  absl::StatusOr<FeedItem> item = Take(step, stop);
  if (!item.ok()) return item.status();
  if (item->header.epoch != epoch) {
    return absl::DataLossError(absl::StrCat("out of step with ", name_, ": batch ", step,
                                            " of epoch ", item->header.epoch,
                                            " while this rank is in epoch ", epoch));
  }
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<loader::SourcedBatch> batch,
                         ToSourcedBatch(*std::move(item)));
  // When the loader is done with the batch its buffer comes back here for the next message:
  // allocating (and page-faulting) megabytes per batch cost 15% of a busy machine's throughput.
  return std::shared_ptr<const loader::SourcedBatch>(
      batch.release(), [this](const loader::SourcedBatch* b) {
        Recycle(std::move(const_cast<loader::SourcedBatch*>(b)->bytes));
        delete b;
      });
}

void FeedWindow::Recycle(std::vector<uint8_t> buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (spare_.size() < capacity_ + 4)
    spare_.push_back(std::move(buffer));  // enough for every batch in flight
}

std::vector<uint8_t> FeedWindow::SpareBuffer() {
  std::lock_guard<std::mutex> lock(mu_);
  if (spare_.empty()) return {};
  std::vector<uint8_t> b = std::move(spare_.back());
  spare_.pop_back();
  return b;
}

absl::StatusOr<std::unique_ptr<loader::SourcedBatch>> ToSourcedBatch(FeedItem item) {
  if (item.header.payload != PayloadKind::kEncoded) {
    return absl::DataLossError("a decoded batch where encoded records were expected");
  }
  auto batch = std::make_unique<loader::SourcedBatch>();
  batch->epoch = item.header.epoch;
  batch->step = item.header.step;
  batch->indices = std::move(item.header.indices);
  batch->bytes = std::move(item.payload);
  size_t offset = 0;
  for (size_t i = 0; i < item.header.sizes.size();
       ++i) {  // sizes add up to the payload (validated on receipt)
    const uint64_t size = item.header.sizes[i];
    batch->records.emplace_back(batch->bytes.data() + offset, size);
    if (!item.header.salts.empty())
      batch->bindings.push_back({item.header.salts[i], item.header.keys[i], false});
    offset += size;
  }
  return batch;
}

}  // namespace ddpio::broadcast
