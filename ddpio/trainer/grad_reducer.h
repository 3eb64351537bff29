// GradReducer: DDP's gradient averaging. The gradient vector is cut into buckets of whole layers,
// from the last layer back (the order backward produces them), each at least `bucket_bytes`.
// When backward reports the last layer of a bucket ready, the bucket is handed to a
// communication thread that all-reduces (averages) it over the Communicator while backward
// continues with earlier layers. Buckets are reduced in the same order on every rank, as
// collectives require. Finish() waits for every bucket of the step.
//
// The communicator is used only by the reducer's thread between Begin() and Finish(); other
// users (parameter broadcast, barriers, evaluation) must call it outside that window.
#ifndef DDPIO_TRAINER_GRAD_REDUCER_H_
#define DDPIO_TRAINER_GRAD_REDUCER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/trainer/mlp.h"

namespace ddpio::trainer {

class GradReducer {
 public:
  // `grads` in the communicator's memory. `layer_event` (optional): for a model on a device,
  // the event recorded after each layer's gradients; a bucket's all-reduce is ordered after the
  // event of its first layer (the last one backward finishes) on the communicator's stream.
  GradReducer(comm::Communicator* comm, float* grads, const std::vector<LayerRange>& layers,
              size_t bucket_bytes, std::chrono::milliseconds timeout,
              std::function<void*(int layer)> layer_event = {});
  ~GradReducer();

  void Begin();                // a new step: no layer ready yet
  void LayerReady(int layer);  // from backward, in any thread that runs it
  absl::Status Finish();       // every bucket averaged (or the first error)

  size_t num_buckets() const { return buckets_.size(); }
  uint64_t comm_ns() const { return comm_ns_.load(); }  // time inside all-reduce, summed

 private:
  struct Bucket {
    size_t begin = 0, end = 0;
    int layers = 0;
    int first_layer = 0;  // the lowest: backward reports it last
  };
  void Run();
  comm::Communicator* comm_;
  float* grads_;
  std::function<void*(int layer)> layer_event_;
  std::chrono::milliseconds timeout_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_layer_;
  std::vector<int> pending_layers_;  // per bucket, this step

  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<int> queue_;
  int done_ = 0;
  bool quit_ = false;
  absl::Status error_;
  std::atomic<uint64_t> comm_ns_{0};
  std::thread thread_;
};

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_GRAD_REDUCER_H_
