#include "ddpio/trainer/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"

namespace ddpio::trainer {

void Sgd::Step(std::vector<float>& params, const std::vector<float>& grads, double lr) {
  const float m = static_cast<float>(momentum_), wd = static_cast<float>(weight_decay_),
              r = static_cast<float>(lr);
  for (size_t i = 0; i < params.size(); ++i) {
    float d = grads[i] + wd * params[i];
    if (m != 0.0f) {
      buf_[i] = started_ ? m * buf_[i] + d : d;
      d = buf_[i];
    }
    params[i] -= r * d;
  }
  started_ = true;
}

namespace {
constexpr EnumName<Decay> kDecays[] = {{Decay::kCosine, "cosine"}, {Decay::kStep, "step"}};
}  // namespace

std::string DecayName(Decay decay) { return NameOf(kDecays, decay); }
absl::StatusOr<Decay> ParseDecay(std::string_view name) {
  return ParseName(kDecays, name, "decay");
}

double Schedule::At(uint64_t step) const {
  if (step < warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const uint64_t s = step - warmup_steps;
  if (decay == Decay::kStep)
    return lr * std::pow(gamma, static_cast<double>(s / std::max<uint64_t>(step_size, 1)));
  const uint64_t span = total_steps > warmup_steps ? total_steps - warmup_steps : 1;
  const double t = std::min(1.0, static_cast<double>(s) / static_cast<double>(span));
  return lr * 0.5 * (1.0 + std::cos(M_PI * t));
}

}  // namespace ddpio::trainer
