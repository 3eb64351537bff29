// An MLP classifier over images: input = one sample's floats (C*H*W), hidden ReLU layers, a
// linear output, softmax cross-entropy. Parameters and gradients each live in one contiguous
// vector (layer 0's weight [out x in] row-major, then its bias, then layer 1's ...), so the
// trainer broadcasts, all-reduces and checksums them as flat buffers.
//
// Backward runs from the last layer to the first and calls `on_layer_ready(l)` as soon as layer
// l's gradients are final, so communication of those can start while earlier layers compute.
// Gradients accumulate (+=) until ZeroGrad(): the no_sync pattern for micro-batches.
#ifndef DDPIO_TRAINER_MLP_H_
#define DDPIO_TRAINER_MLP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "ddpio/trainer/blas.h"

namespace ddpio::trainer {

struct LayerRange {
  size_t begin = 0, end = 0;  // [begin, end) in the parameter vector: weight then bias
};

// The parameter vector's layout for `sizes` (weight [out x in] row-major, then bias, per layer).
std::vector<LayerRange> MlpLayers(const std::vector<int>& sizes);

class Mlp {
 public:
  // sizes = {inputs, hidden..., classes}; parameters initialised like torch.nn.Linear
  // (uniform in +-1/sqrt(fan_in)) from `seed`. Products run on `engine` (not owned; default:
  // OpenBLAS, 1 thread); check engine.status() after a step.
  Mlp(std::vector<int> sizes, uint64_t seed, MatMul* engine = nullptr);

  // Forward and backward on a batch: x is [batch x inputs], labels in [0, classes) or -1 (left
  // out: a skipped bad sample). The loss is the sum of cross-entropies over the labelled samples
  // times `scale` (1 / batch for a mean; 1 / (batch * k) per micro-batch of k accumulated).
  // Returns that loss; adds its gradients to grads().
  double ForwardBackward(const float* x, const int32_t* labels, int batch, double scale,
                         const std::function<void(int layer)>& on_layer_ready = {});
  // The same for an input of `per_row` one-hot vectors: row i's input is the concatenation of
  // per_row one-hot vectors of inputs() / per_row each, slot s hot at ids[i * per_row + s] (none
  // for an id < 0). Layer 0 is then an embedding: its product is a gather of the weight's columns
  // and its gradient a scatter into them, O(batch * per_row * width) instead of a dense product.
  // Ids must be below inputs() / per_row.
  double ForwardBackwardIds(const int32_t* ids, int per_row, const int32_t* labels, int batch,
                            double scale,
                            const std::function<void(int layer)>& on_layer_ready = {});
  // Predicted class of each sample.
  void Predict(const float* x, int batch, std::vector<int>* classes);

  void ZeroGrad();
  std::vector<float>& params() { return params_; }
  std::vector<float>& grads() { return grads_; }
  const std::vector<LayerRange>& layers() const { return layers_; }
  const std::vector<int>& sizes() const { return sizes_; }
  int inputs() const { return sizes_.front(); }

 private:
  void Forward(const float* x, const int32_t* ids, int per_row, int batch);
  double Backward(const int32_t* labels, int batch, double scale,
                  const std::function<void(int layer)>& on_layer_ready);
  std::vector<int> sizes_;
  std::vector<LayerRange> layers_;
  std::vector<float> params_, grads_;
  std::vector<std::vector<float>> act_;  // act_[l]: input of layer l (act_[0] unused: x)
  std::vector<float> logits_, delta_, delta_prev_;
  const float* x_ = nullptr;
  const int32_t* ids_ = nullptr;  // one-hot input (ForwardBackwardIds), else null
  int per_row_ = 0;
  MatMul* mm_;
};

// FNV-1a over the bytes of the parameters: identical on every rank after correct DDP training.
uint64_t ParamChecksum(const std::vector<float>& params);

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_MLP_H_
