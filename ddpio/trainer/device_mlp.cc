#include "ddpio/trainer/device_mlp.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ddpio/trainer/device_kernels.h"

namespace ddpio::trainer {

namespace {

using device::CopyKind;

// The stream as the kernels and cuBLAS take it.
cudaStream_t Raw(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

DeviceMlp::DeviceMlp(std::unique_ptr<device::CudaRuntime> cuda, std::vector<int> sizes,
                     std::array<float, 3> mean, std::array<float, 3> stddev)
    : sizes_(std::move(sizes)),
      layers_(MlpLayers(sizes_)),
      mean_(mean),
      stddev_(stddev),
      cuda_(std::move(cuda)) {}

absl::StatusOr<std::unique_ptr<DeviceMlp>> DeviceMlp::Create(
    std::unique_ptr<device::CudaRuntime> cuda, const std::vector<int>& sizes,
    const std::vector<float>& initial, std::array<float, 3> mean, std::array<float, 3> stddev) {
  if (sizes.size() < 2 || *std::min_element(sizes.begin(), sizes.end()) < 1) {
    return absl::InvalidArgumentError(
        "a model needs an input size, a class count and no empty layer");
  }
  if (cuda == nullptr) return absl::InvalidArgumentError("the device model needs a CUDA runtime");
  std::unique_ptr<DeviceMlp> m(new DeviceMlp(std::move(cuda), sizes, mean, stddev));
  if (initial.size() != m->num_params()) {
    return absl::InvalidArgumentError(
        absl::StrCat(initial.size(), " initial parameters for a model of ", m->num_params()));
  }
  absl::StatusOr<void*> stream = m->cuda_->CreateStream();
  if (!m->Ok(stream.status())) return m->status_;
  m->stream_ = *stream;
  // cuBLAS and the kernels act on the calling thread's current device: the runtime's.
  if (!m->Ok(m->cuda_->Activate()) || !m->Blas(cublasCreate(&m->blas_), "cublasCreate") ||
      !m->Blas(cublasSetStream(m->blas_, Raw(m->stream_)), "cublasSetStream")) {
    return m->status_;
  }
  m->events_.assign(m->layers_.size(), nullptr);
  for (void*& e : m->events_) {
    absl::StatusOr<void*> event = m->cuda_->CreateEvent();
    if (!m->Ok(event.status())) return m->status_;
    e = *event;
  }
  const size_t n = m->num_params();
  if (!m->Alloc(&m->params_, n) || !m->Alloc(&m->grads_, n) || !m->Alloc(&m->momentum_, n) ||
      !m->Alloc(&m->nonfinite_, 1)) {
    return m->status_;
  }
  m->Ok(m->cuda_->MemsetAsync(m->momentum_, 0, n * sizeof(float), m->stream_));
  m->ZeroGrad();
  m->Ok(m->cuda_->CopyAsync(m->params_, initial.data(), n * sizeof(float), CopyKind::kHostToDevice,
                            m->stream_));
  absl::Status st = m->Wait();
  if (!st.ok()) return st;
  return m;
}

DeviceMlp::~DeviceMlp() {
  if (stream_ != nullptr)
    (void)cuda_->SyncStream(stream_);  // nothing queued may touch freed memory
  for (void* p : owned_) cuda_->DeviceFree(p);
  for (void* e : events_) {
    if (e != nullptr) cuda_->DestroyEvent(e);
  }
  if (blas_ != nullptr) (void)cublasDestroy(blas_);
  if (stream_ != nullptr) cuda_->DestroyStream(stream_);
}

bool DeviceMlp::Ok(const absl::Status& st) {
  if (st.ok()) return status_.ok();
  if (status_.ok()) status_ = st;
  return false;
}

bool DeviceMlp::Kernel(int cuda_error, const char* what) {
  const auto err = static_cast<cudaError_t>(cuda_error);
  if (err == cudaSuccess) return status_.ok();
  return Ok(absl::InternalError(
      absl::StrCat(what, ": CUDA error ", cuda_error, " ", cudaGetErrorString(err))));
}

bool DeviceMlp::Blas(int status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return status_.ok();
  if (status_.ok()) {
    status_ = absl::InternalError(
        absl::StrCat(what, ": ", cublasGetStatusString(static_cast<cublasStatus_t>(status))));
  }
  return false;
}

template <typename T>
bool DeviceMlp::Alloc(T** p, size_t count) {
  void* raw = nullptr;
  if (!Ok(cuda_->DeviceAlloc(&raw, std::max<size_t>(count, 1) * sizeof(T)))) return false;
  owned_.push_back(raw);
  *p = static_cast<T*>(raw);
  return true;
}

absl::Status DeviceMlp::Wait() {
  if (!status_.ok()) return status_;
  Ok(cuda_->SyncStream(stream_));
  return status_;
}

bool DeviceMlp::Reserve(int batch) {
  if (!status_.ok()) return false;
  if (batch <= capacity_) return true;
  // The buffers grow to the largest batch seen (the first batch of a run is the largest but the
  // last); what they replace stays allocated until destruction: queued work may still use it.
  const size_t b = static_cast<size_t>(batch);
  const int widest = *std::max_element(sizes_.begin() + 1, sizes_.end());
  act_.assign(sizes_.size(), nullptr);
  for (size_t l = 1; l < sizes_.size(); ++l) {
    if (!Alloc(&act_[l], b * sizes_[l])) return false;
  }
  free_losses_
      .clear();  // too small now (all stay allocated until destruction: queued work may use them)
  if (!Alloc(&pixels_, b * inputs()) || !Alloc(&labels_, b) || !Alloc(&predicted_, b) ||
      !Alloc(&x_, b * inputs()) || !Alloc(&delta_, b * widest) ||
      !Alloc(&delta_prev_, b * widest)) {
    return false;
  }
  capacity_ = batch;
  return true;
}

void DeviceMlp::Gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
                     const float* b, int ldb, float beta, float* c, int ldc) {
  const float alpha = 1.0f;
  Blas(cublasSgemm(blas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                   n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc),
       "cublasSgemm");
}

void DeviceMlp::Forward(const uint8_t* pixels, bool pixels_on_device, int batch) {
  const size_t values = static_cast<size_t>(batch) * inputs();
  const uint8_t* in = pixels;
  if (!pixels_on_device) {
    if (!Ok(cuda_->CopyAsync(pixels_, pixels, values, CopyKind::kHostToDevice, stream_))) return;
    in = pixels_;
  }
  Kernel(ddpio_normalize_hwc(in, x_, values, mean_[0], mean_[1], mean_[2], stddev_[0], stddev_[1],
                             stddev_[2], Raw(stream_)),
         "normalize");
  const float* x = x_;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const int n_in = sizes_[l], n_out = sizes_[l + 1];
    const float* w = params_ + layers_[l].begin;
    const float* bias = w + static_cast<size_t>(n_out) * n_in;
    float* out = act_[l + 1];
    Kernel(ddpio_fill_rows(out, bias, batch, n_out, Raw(stream_)), "fill_rows");
    Gemm(false, true, batch, n_out, n_in, x, n_in, w, n_in, 1.0f, out, n_out);  // x W^T + b
    if (l + 1 < layers_.size())
      Kernel(ddpio_relu(out, static_cast<size_t>(batch) * n_out, Raw(stream_)), "relu");
    x = out;
  }
}

void DeviceMlp::ForwardBackward(const uint8_t* pixels, bool pixels_on_device, const int32_t* labels,
                                int batch, double scale,
                                const std::function<void(int layer)>& on_layer_ready) {
  // Every layer is reported, also after an error: the caller's all-reduces must stay matched
  // with the other ranks' (and it checks status() once they are done).
  int next = static_cast<int>(layers_.size()) - 1;
  auto report_through = [&](int layer) {
    for (; next >= layer; --next) {
      if (on_layer_ready) on_layer_ready(next);
    }
  };
  Backward(pixels, pixels_on_device, labels, batch, scale, report_through);
  report_through(0);
}

void DeviceMlp::Backward(const uint8_t* pixels, bool pixels_on_device, const int32_t* labels,
                         int batch, double scale, const std::function<void(int layer)>& ready) {
  if (!Reserve(batch)) return;
  if (!Ok(cuda_->CopyAsync(labels_, labels, batch * sizeof(int32_t), CopyKind::kHostToDevice,
                           stream_))) {
    return;
  }
  Forward(pixels, pixels_on_device, batch);
  const int classes = sizes_.back();
  double* loss = nullptr;
  if (free_losses_.empty()) {
    if (!Alloc(&loss, capacity_)) return;
  } else {
    loss = free_losses_.back();
    free_losses_.pop_back();
  }
  pending_losses_.push_back({loss, batch, capacity_});
  Kernel(
      ddpio_softmax_xent(act_.back(), labels_, batch, classes, scale, delta_, loss, Raw(stream_)),
      "softmax_xent");
  for (int l = static_cast<int>(layers_.size()) - 1; l >= 0 && status_.ok(); --l) {
    const int n_in = sizes_[l], n_out = sizes_[l + 1];
    const float* in = l == 0 ? x_ : act_[l];
    float* gw = grads_ + layers_[l].begin;
    float* gb = gw + static_cast<size_t>(n_out) * n_in;
    Gemm(true, false, n_out, n_in, batch, delta_, n_out, in, n_in, 1.0f, gw, n_in);  // dW += d^T a
    Kernel(ddpio_add_column_sums(delta_, batch, n_out, gb, Raw(stream_)), "add_column_sums");
    if (l > 0) {  // delta for the layer below: (d W) masked by ReLU'
      const float* w = params_ + layers_[l].begin;
      Gemm(false, false, batch, n_in, n_out, delta_, n_out, w, n_in, 0.0f, delta_prev_, n_in);
      Kernel(ddpio_relu_mask(delta_prev_, act_[l], static_cast<size_t>(batch) * n_in, Raw(stream_)),
             "relu_mask");
      std::swap(delta_, delta_prev_);
    }
    if (!Ok(cuda_->RecordEvent(events_[l], stream_))) return;
    ready(l);
  }
}

absl::StatusOr<double> DeviceMlp::TakeLoss() {
  std::vector<std::vector<double>> losses;
  for (const PendingLoss& p : pending_losses_) {
    losses.emplace_back(p.batch);
    Ok(cuda_->CopyAsync(losses.back().data(), p.device, p.batch * sizeof(double),
                        CopyKind::kDeviceToHost, stream_));
  }
  absl::Status st = Wait();
  for (const PendingLoss& p : pending_losses_) {
    if (p.capacity == capacity_) free_losses_.push_back(p.device);
  }
  pending_losses_.clear();
  if (!st.ok()) return st;
  double total = 0;
  for (const std::vector<double>& batch : losses) {
    double loss = 0;  // as Mlp::ForwardBackward sums a batch, then the caller sums batches
    for (double v : batch) loss += v;
    total += loss;
  }
  return total;
}

absl::StatusOr<bool> DeviceMlp::GradientsFinite() {
  uint32_t count = 0;
  Ok(cuda_->MemsetAsync(nonfinite_, 0, sizeof(uint32_t), stream_));
  Kernel(ddpio_count_nonfinite(grads_, num_params(), nonfinite_, Raw(stream_)), "count_nonfinite");
  Ok(cuda_->CopyAsync(&count, nonfinite_, sizeof(count), CopyKind::kDeviceToHost, stream_));
  absl::Status st = Wait();
  if (!st.ok()) return st;
  return count == 0;
}

void DeviceMlp::Step(float lr, float momentum, float weight_decay) {
  Kernel(ddpio_sgd(params_, grads_, momentum_, num_params(), momentum, weight_decay, lr,
                   started_ ? 1 : 0, Raw(stream_)),
         "sgd");
  started_ = true;
}

void DeviceMlp::ZeroGrad() {
  Ok(cuda_->MemsetAsync(grads_, 0, num_params() * sizeof(float), stream_));
}

absl::Status DeviceMlp::Predict(const uint8_t* pixels, bool pixels_on_device, int batch,
                                std::vector<int>* classes) {
  if (!Reserve(batch)) return status_;
  Forward(pixels, pixels_on_device, batch);
  std::vector<int32_t> predicted(batch);
  Kernel(ddpio_argmax_rows(act_.back(), batch, sizes_.back(), predicted_, Raw(stream_)),
         "argmax_rows");
  Ok(cuda_->CopyAsync(predicted.data(), predicted_, batch * sizeof(int32_t),
                      CopyKind::kDeviceToHost, stream_));
  absl::Status st = Wait();
  if (!st.ok()) return st;
  classes->assign(predicted.begin(), predicted.end());
  return absl::OkStatus();
}

absl::Status DeviceMlp::GetParams(std::vector<float>* params) {
  params->resize(num_params());
  Ok(cuda_->CopyAsync(params->data(), params_, num_params() * sizeof(float),
                      CopyKind::kDeviceToHost, stream_));
  return Wait();
}

absl::Status DeviceMlp::GetMomentum(std::vector<float>* momentum, bool* started) {
  momentum->resize(num_params());
  Ok(cuda_->CopyAsync(momentum->data(), momentum_, num_params() * sizeof(float),
                      CopyKind::kDeviceToHost, stream_));
  *started = started_;
  return Wait();
}

absl::Status DeviceMlp::SetState(const std::vector<float>& params,
                                 const std::vector<float>& momentum, bool started) {
  if (params.size() != num_params() || momentum.size() != num_params()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a state of ", params.size(), " parameters and ", momentum.size(),
                     " momentum values for a model of ", num_params()));
  }
  Ok(cuda_->CopyAsync(params_, params.data(), num_params() * sizeof(float), CopyKind::kHostToDevice,
                      stream_));
  Ok(cuda_->CopyAsync(momentum_, momentum.data(), num_params() * sizeof(float),
                      CopyKind::kHostToDevice, stream_));
  started_ = started;
  return Wait();  // the host vectors may go once this returns
}

}  // namespace ddpio::trainer
