#include "ddpio/trainer/grad_reducer.h"

#include "ddpio/common/status_macros.h"

namespace ddpio::trainer {

GradReducer::GradReducer(comm::Communicator* comm, float* grads,
                         const std::vector<LayerRange>& layers, size_t bucket_bytes,
                         std::chrono::milliseconds timeout,
                         std::function<void*(int layer)> layer_event)
    : comm_(comm),
      grads_(grads),
      layer_event_(std::move(layer_event)),
      timeout_(timeout),
      bucket_of_layer_(layers.size()) {
  // From the last layer back: a bucket closes once it holds bucket_bytes (or at layer 0).
  Bucket open;
  for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l) {
    if (open.layers == 0) open.end = layers[l].end;
    open.begin = layers[l].begin;
    open.first_layer = l;
    ++open.layers;
    bucket_of_layer_[l] = static_cast<int>(buckets_.size());
    if ((open.end - open.begin) * sizeof(float) >= bucket_bytes || l == 0) {
      buckets_.push_back(open);
      open = Bucket();
    }
  }
  pending_layers_.resize(buckets_.size());
  thread_ = std::thread([this] { Run(); });
}

GradReducer::~GradReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void GradReducer::Begin() {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_layers_[b] = buckets_[b].layers;
  done_ = 0;
}

void GradReducer::LayerReady(int layer) {
  std::lock_guard<std::mutex> lock(mu_);
  const int b = bucket_of_layer_[layer];
  if (--pending_layers_[b] == 0) {
    queue_.push_back(b);
    changed_.notify_all();
  }
}

absl::Status GradReducer::Finish() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return done_ == static_cast<int>(buckets_.size()); });
  return error_;
}

void GradReducer::Run() {
  for (;;) {
    int b = -1;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return quit_ || !queue_.empty(); });
      if (queue_.empty()) return;  // quit
      b = queue_.front();
      queue_.pop_front();
    }
    absl::Status st;
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      st = error_;  // after a failure the communicator is poisoned: do not call it again
    }
    if (st.ok()) {
      const Bucket& bucket = buckets_[b];
      if (layer_event_) st = comm_->WaitFor(layer_event_(bucket.first_layer));
      if (st.ok()) {
        st = comm_->AllReduce(grads_ + bucket.begin, bucket.end - bucket.begin,
                              comm::ReduceOp::kAverage, timeout_);
      }
    }
    const uint64_t ns = static_cast<uint64_t>((std::chrono::steady_clock::now() - t0).count());
    {
      std::lock_guard<std::mutex> lock(mu_);
      comm_ns_ += ns;
      if (!st.ok() && error_.ok()) error_ = Annotate(st, "all-reducing gradients");
      ++done_;
    }
    changed_.notify_all();
  }
}

}  // namespace ddpio::trainer
