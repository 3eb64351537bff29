// SGD with momentum and weight decay, PyTorch's torch.optim.SGD semantics (dampening 0, not
// Nesterov): d = g + wd * p; buf = d on the first step, else momentum * buf + d; p -= lr * buf.
// And the learning-rate schedule: linear warm-up, then cosine decay to 0 or step decay.
#ifndef DDPIO_TRAINER_OPTIMIZER_H_
#define DDPIO_TRAINER_OPTIMIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::trainer {

class Sgd {
 public:
  Sgd(size_t params, double momentum, double weight_decay)
      : momentum_(momentum), weight_decay_(weight_decay), buf_(params, 0.0f) {}
  void Step(std::vector<float>& params, const std::vector<float>& grads, double lr);
  // Momentum buffers and whether they started (saved in checkpoints).
  std::vector<float>& buffers() { return buf_; }
  bool& started() { return started_; }

 private:
  double momentum_, weight_decay_;
  std::vector<float> buf_;
  bool started_ = false;
};

enum class Decay { kCosine, kStep };
std::string DecayName(Decay decay);
absl::StatusOr<Decay> ParseDecay(std::string_view name);

struct Schedule {
  double lr = 0.1;
  uint64_t warmup_steps = 0;
  uint64_t total_steps = 1;
  Decay decay = Decay::kCosine;
  uint64_t step_size = 1000;  // kStep: multiply by gamma every step_size steps after warm-up
  double gamma = 0.1;
  double At(uint64_t step) const;
};

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_OPTIMIZER_H_
