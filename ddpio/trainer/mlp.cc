#include "ddpio/trainer/mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "ddpio/common/coding.h"
#include "ddpio/common/hash.h"
#include "ddpio/trainer/blas.h"
#include "ddpio/trainer/device_math.h"

namespace ddpio::trainer {

std::vector<LayerRange> MlpLayers(const std::vector<int>& sizes) {
  std::vector<LayerRange> layers;
  size_t offset = 0;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const size_t n = static_cast<size_t>(sizes[l + 1]) * sizes[l] + sizes[l + 1];
    layers.push_back({offset, offset + n});
    offset += n;
  }
  return layers;
}

Mlp::Mlp(std::vector<int> sizes, uint64_t seed, MatMul* engine)
    : sizes_(std::move(sizes)),
      layers_(MlpLayers(sizes_)),
      mm_(engine != nullptr ? engine : &DefaultMatMul()) {
  const size_t offset = layers_.empty() ? 0 : layers_.back().end;
  params_.resize(offset);
  grads_.assign(offset, 0.0f);
  std::mt19937_64 rng(seed);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(sizes_[l]));
    std::uniform_real_distribution<float> u(-bound, bound);
    for (size_t i = layers_[l].begin; i < layers_[l].end; ++i) params_[i] = u(rng);
  }
  act_.resize(layers_.size());
}

void Mlp::ZeroGrad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void Mlp::Forward(const float* x, const int32_t* ids, int per_row, int batch) {
  x_ = x;
  ids_ = ids;
  per_row_ = per_row;
  const float* in = x;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const int n_in = sizes_[l], n_out = sizes_[l + 1];
    const float* w = params_.data() + layers_[l].begin;
    const float* b = w + static_cast<size_t>(n_out) * n_in;
    const bool last = l + 1 == layers_.size();
    std::vector<float>& out = last ? logits_ : act_[l + 1];
    out.resize(static_cast<size_t>(batch) * n_out);
    for (int i = 0; i < batch; ++i)
      std::memcpy(out.data() + static_cast<size_t>(i) * n_out, b, n_out * sizeof(float));
    if (l == 0 && ids != nullptr) {  // one-hot x: x W^T gathers W's columns
      const int slot = n_in / per_row;
      for (int i = 0; i < batch; ++i) {
        float* o = out.data() + static_cast<size_t>(i) * n_out;
        for (int s = 0; s < per_row; ++s) {
          const int32_t id = ids[static_cast<size_t>(i) * per_row + s];
          if (id < 0) continue;
          const float* col = w + static_cast<size_t>(s) * slot + id;
          for (int k = 0; k < n_out; ++k) o[k] += col[static_cast<size_t>(k) * n_in];
        }
      }
    } else {
      mm_->Gemm(false, true, batch, n_out, n_in, 1.0f, in, n_in, w, n_in, 1.0f, out.data(),
                n_out);  // x W^T + b
    }
    if (!last) {
      for (float& v : out) v = std::max(v, 0.0f);
    }
    in = out.data();
  }
}

double Mlp::ForwardBackward(const float* x, const int32_t* labels, int batch, double scale,
                            const std::function<void(int layer)>& on_layer_ready) {
  Forward(x, nullptr, 0, batch);
  return Backward(labels, batch, scale, on_layer_ready);
}

double Mlp::ForwardBackwardIds(const int32_t* ids, int per_row, const int32_t* labels, int batch,
                               double scale, const std::function<void(int layer)>& on_layer_ready) {
  Forward(nullptr, ids, per_row, batch);
  return Backward(labels, batch, scale, on_layer_ready);
}

double Mlp::Backward(const int32_t* labels, int batch, double scale,
                     const std::function<void(int layer)>& on_layer_ready) {
  const int classes = sizes_.back();
  double loss = 0;
  delta_.assign(static_cast<size_t>(batch) * classes, 0.0f);
  for (int i = 0; i < batch; ++i) {  // the device model's row, bit for bit (device_math.h)
    loss += device_math::SoftmaxXentRow(logits_.data() + static_cast<size_t>(i) * classes,
                                        labels[i], classes, scale,
                                        delta_.data() + static_cast<size_t>(i) * classes);
  }
  for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
    const int n_in = sizes_[l], n_out = sizes_[l + 1];
    const float* in = l == 0 ? x_ : act_[l].data();
    float* gw = grads_.data() + layers_[l].begin;
    float* gb = gw + static_cast<size_t>(n_out) * n_in;
    if (l == 0 && ids_ != nullptr) {  // one-hot a: d^T a scatters into W's columns
      const int slot = n_in / per_row_;
      for (int i = 0; i < batch; ++i) {
        const float* d = delta_.data() + static_cast<size_t>(i) * n_out;
        for (int s = 0; s < per_row_; ++s) {
          const int32_t id = ids_[static_cast<size_t>(i) * per_row_ + s];
          if (id < 0) continue;
          float* col = gw + static_cast<size_t>(s) * slot + id;
          for (int k = 0; k < n_out; ++k) col[static_cast<size_t>(k) * n_in] += d[k];
        }
      }
    } else {
      mm_->Gemm(true, false, n_out, n_in, batch, 1.0f, delta_.data(), n_out, in, n_in, 1.0f, gw,
                n_in);  // dW += d^T a
    }
    for (int i = 0; i < batch; ++i) {
      const float* d = delta_.data() + static_cast<size_t>(i) * n_out;
      for (int o = 0; o < n_out; ++o) gb[o] += d[o];
    }
    if (l > 0) {  // delta for the layer below: (d W) masked by ReLU'
      delta_prev_.resize(static_cast<size_t>(batch) * n_in);
      const float* w = params_.data() + layers_[l].begin;
      mm_->Gemm(false, false, batch, n_in, n_out, 1.0f, delta_.data(), n_out, w, n_in, 0.0f,
                delta_prev_.data(), n_in);
      const std::vector<float>& a = act_[l];
      for (size_t i = 0; i < delta_prev_.size(); ++i) {
        if (a[i] <= 0.0f) delta_prev_[i] = 0.0f;
      }
      delta_.swap(delta_prev_);
    }
    if (on_layer_ready) on_layer_ready(l);
  }
  return loss;
}

void Mlp::Predict(const float* x, int batch, std::vector<int>* classes) {
  Forward(x, nullptr, 0, batch);
  const int n = sizes_.back();
  classes->resize(batch);
  for (int i = 0; i < batch; ++i) {
    const float* z = logits_.data() + static_cast<size_t>(i) * n;
    (*classes)[i] = static_cast<int>(std::max_element(z, z + n) - z);
  }
}

uint64_t ParamChecksum(const std::vector<float>& params) {
  std::string le;
  PutLeAll(&le, params);  // the same digest on any host
  return Fnv1a64(le);
}

}  // namespace ddpio::trainer
