// TrainModel on the CPU: Mlp + Sgd in host memory. Images: the input normalised through a lookup
// table. Token sequences: each position's `context` ids (the id and those before it in the
// window) one-hot into the Mlp's first layer, which is thereby an embedding, and the next id as
// its label.
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ddpio/trainer/optimizer.h"
#include "ddpio/trainer/train_model.h"

namespace ddpio::trainer {
namespace {

// uint8 H,W,C -> float, (x / 255 - mean) / std per channel (the consumer-side normalisation).
class Normalizer {
 public:
  Normalizer(const std::array<float, 3>& mean, const std::array<float, 3>& stddev) {
    for (int c = 0; c < 3; ++c) {
      for (int v = 0; v < 256; ++v) lut_[c][v] = (v / 255.0f - mean[c]) / stddev[c];
    }
  }
  void Apply(const uint8_t* in, size_t pixels, float* out) const {
    for (size_t i = 0; i < pixels; ++i) {
      out[3 * i] = lut_[0][in[3 * i]];
      out[3 * i + 1] = lut_[1][in[3 * i + 1]];
      out[3 * i + 2] = lut_[2][in[3 * i + 2]];
    }
  }

 private:
  std::array<std::array<float, 256>, 3> lut_{};
};

class CpuModel : public TrainModel {
 public:
  CpuModel(const ModelOptions& o, std::unique_ptr<MatMul> engine, std::string path)
      : engine_(std::move(engine)),
        path_(std::move(path)),
        mlp_(o.sizes, o.init_seed, engine_.get()),
        sgd_(mlp_.params().size(), o.momentum, o.weight_decay),
        norm_(o.mean, o.stddev) {}

  std::string Describe() const override { return path_; }
  float* params() override { return mlp_.params().data(); }
  float* grads() override { return mlp_.grads().data(); }
  size_t num_params() const override { return layers().empty() ? 0 : layers().back().end; }
  const std::vector<LayerRange>& layers() const override { return mlp_.layers(); }

  void ForwardBackward(const loader::Batch& b, double scale,
                       const std::function<void(int layer)>& ready) override {
    Normalize(b);
    loss_ += mlp_.ForwardBackward(x_.data(), b.labels, static_cast<int>(b.size), scale, ready);
  }
  absl::StatusOr<double> TakeLoss() override {
    const double loss = loss_;
    loss_ = 0;
    return loss;
  }
  absl::StatusOr<bool> GradientsFinite() override {
    float sum = 0;  // NaN and infinities survive a sum
    for (float x : mlp_.grads()) sum += x * 0.0f;
    return std::isfinite(sum);
  }
  void Step(double lr) override { sgd_.Step(mlp_.params(), mlp_.grads(), lr); }
  void ZeroGrad() override { mlp_.ZeroGrad(); }
  absl::Status Predict(const loader::Batch& b, std::vector<int>* classes) override {
    Normalize(b);
    mlp_.Predict(x_.data(), static_cast<int>(b.size), classes);
    return engine_->status();
  }
  absl::Status GetState(std::vector<float>* params, std::vector<float>* momentum,
                        bool* started) override {
    *params = mlp_.params();
    *momentum = sgd_.buffers();
    *started = sgd_.started();
    return absl::OkStatus();
  }
  absl::Status SetState(const std::vector<float>& params, const std::vector<float>& momentum,
                        bool started) override {
    mlp_.params() = params;
    sgd_.buffers() = momentum;
    sgd_.started() = started;
    return absl::OkStatus();
  }
  absl::Status status() const override { return engine_->status(); }

 protected:
  void Normalize(const loader::Batch& b) {
    const size_t inputs = static_cast<size_t>(mlp_.inputs());
    x_.resize(b.size * inputs);
    for (uint64_t k = 0; k < b.size; ++k)
      norm_.Apply(b.data + k * inputs, inputs / 3, x_.data() + k * inputs);
  }

  std::unique_ptr<MatMul> engine_;
  std::string path_;
  Mlp mlp_;
  Sgd sgd_;
  Normalizer norm_;
  std::vector<float> x_;
  double loss_ = 0;
};

// Sample i of a batch is a window of seq_len + 1 uint32 ids (loader/token_sample_kind.h); it
// makes seq_len rows: row j predicts id j + 1 from ids j - context + 1 .. j of the window (-1,
// no input, before its start), labelled -1 (left out) in a sample flagged invalid (padding).
class TokenCpuModel : public CpuModel {
 public:
  TokenCpuModel(const ModelOptions& o, std::unique_ptr<MatMul> engine, std::string path)
      : CpuModel(o, std::move(engine), std::move(path)),
        seq_len_(static_cast<int>(o.seq_len)),
        context_(o.context),
        vocab_(static_cast<uint32_t>(o.sizes.back())) {}

  void ForwardBackward(const loader::Batch& b, double scale,
                       const std::function<void(int layer)>& ready) override {
    Rows(b);
    // The loss per token: a sample's rows share its scale.
    loss_ += mlp_.ForwardBackwardIds(ids_.data(), context_, labels_.data(),
                                     static_cast<int>(labels_.size()), scale / seq_len_, ready);
  }
  absl::Status Predict(const loader::Batch&, std::vector<int>*) override {
    return absl::UnimplementedError("the token model predicts no class of a sample");
  }

 private:
  // The batch's rows into ids_ and labels_. An id outside the vocabulary (which the trainer
  // refuses before the step: CheckTokens) is no input and no label.
  void Rows(const loader::Batch& b) {
    const size_t window = static_cast<size_t>(seq_len_) + 1;
    const auto* ids = reinterpret_cast<const uint32_t*>(b.data);
    const auto id = [&](uint32_t v) { return v < vocab_ ? static_cast<int32_t>(v) : -1; };
    ids_.assign(b.size * seq_len_ * context_, -1);
    labels_.assign(b.size * seq_len_, -1);
    for (uint64_t i = 0; i < b.size; ++i) {
      const uint32_t* w = ids + i * window;
      for (int j = 0; j < seq_len_; ++j) {
        const size_t row = i * seq_len_ + j;
        for (int s = 0; s < context_; ++s) {
          const int at = j - (context_ - 1) + s;
          if (at >= 0) ids_[row * context_ + s] = id(w[at]);
        }
        if (b.valid == nullptr || b.valid[i] != 0) labels_[row] = id(w[j + 1]);
      }
    }
  }

  int seq_len_, context_;
  uint32_t vocab_;
  std::vector<int32_t> ids_, labels_;
};

}  // namespace

std::unique_ptr<TrainModel> MakeCpuModel(const ModelOptions& options,
                                         std::unique_ptr<MatMul> engine, std::string engine_path) {
  if (options.context > 0) {
    return std::make_unique<TokenCpuModel>(options, std::move(engine), std::move(engine_path));
  }
  return std::make_unique<CpuModel>(options, std::move(engine), std::move(engine_path));
}

}  // namespace ddpio::trainer
