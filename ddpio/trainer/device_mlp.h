// DeviceMlp: the trainer's Mlp resident on a CUDA device. Parameters, gradients, SGD momentum,
// activations and the normalised input live in device memory; the products run through cuBLAS
// and the element-wise steps through ddpio's kernels (device_kernels.h), all on the model's own
// stream, so a step enqueues its work and the host waits only where it needs a number
// (TakeLoss, GradientsFinite, Predict, copies to the host).
//
// Same layout, initialisation (the caller passes an Mlp's parameters) and arithmetic as Mlp:
// through the stand-ins (tests/gpu_standin) the two agree bit for bit; on a GPU they agree to
// the last place of exp/log and of cuBLAS's summation order.
//
// Backward records an event on the model's stream after each layer's gradients and then calls
// on_layer_ready(l): a gradient all-reduce on another stream waits for layer_event(l) (what
// GradReducer does with a device communicator) and so overlaps the rest of backward. After an
// error the remaining layers are still reported (without their work), so that every rank's
// all-reduces stay matched; the caller then finds the error in status().
//
// Inputs — the uint8 H,W,C pixels (in device or host memory) and the host labels — are read by
// work queued on the stream: they must stay valid until the next TakeLoss() or Predict() has
// returned. Errors (a failed allocation, a launch or cuBLAS error) are sticky: status() keeps the
// first; every call after it does nothing.
#ifndef DDPIO_TRAINER_DEVICE_MLP_H_
#define DDPIO_TRAINER_DEVICE_MLP_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/trainer/mlp.h"

struct cublasContext;

namespace ddpio::trainer {

class DeviceMlp {
 public:
  // On `cuda`'s device (memory, copies, the stream and events through it; cuBLAS and the kernels
  // on the stream it makes): a non-blocking stream, a cuBLAS handle on it, the parameters copied
  // from `initial` (sizes as for Mlp). `mean` and `stddev` normalise the input as the CPU trainer
  // does.
  static absl::StatusOr<std::unique_ptr<DeviceMlp>> Create(
      std::unique_ptr<device::CudaRuntime> cuda, const std::vector<int>& sizes,
      const std::vector<float>& initial, std::array<float, 3> mean, std::array<float, 3> stddev);
  ~DeviceMlp();
  DeviceMlp(const DeviceMlp&) = delete;
  DeviceMlp& operator=(const DeviceMlp&) = delete;

  // Forward and backward on `batch` samples, adding to the gradients; the loss (as
  // Mlp::ForwardBackward's) is collected by TakeLoss.
  void ForwardBackward(const uint8_t* pixels, bool pixels_on_device, const int32_t* labels,
                       int batch, double scale,
                       const std::function<void(int layer)>& on_layer_ready = {});
  // Waits for the stream; the sum of the losses of every ForwardBackward since the last call.
  absl::StatusOr<double> TakeLoss();
  // Waits for the stream; whether every gradient is finite.
  absl::StatusOr<bool> GradientsFinite();
  // torch.optim.SGD's step (Sgd) on the device; ZeroGrad clears the gradients.
  void Step(float lr, float momentum, float weight_decay);
  void ZeroGrad();
  // Waits for the stream; each sample's predicted class.
  absl::Status Predict(const uint8_t* pixels, bool pixels_on_device, int batch,
                       std::vector<int>* classes);

  // Host copies (waiting for the stream): for checkpoints, results and resume.
  absl::Status GetParams(std::vector<float>* params);
  absl::Status GetMomentum(std::vector<float>* momentum, bool* started);
  absl::Status SetState(const std::vector<float>& params, const std::vector<float>& momentum,
                        bool started);

  float* params() { return params_; }  // device memory, for the initial broadcast
  float* grads() { return grads_; }    // device memory, for the all-reduce
  size_t num_params() const { return layers_.empty() ? 0 : layers_.back().end; }
  const std::vector<LayerRange>& layers() const { return layers_; }
  const std::vector<int>& sizes() const { return sizes_; }
  int inputs() const { return sizes_.front(); }
  void* layer_event(int layer) const { return events_[layer]; }  // a cudaEvent_t
  void* stream() const { return stream_; }                       // a cudaStream_t
  absl::Status status() const { return status_; }

 private:
  DeviceMlp(std::unique_ptr<device::CudaRuntime> cuda, std::vector<int> sizes,
            std::array<float, 3> mean, std::array<float, 3> stddev);
  bool Ok(const absl::Status& st);                // keeps the first error
  bool Kernel(int cuda_error, const char* what);  // a kernel launch's cudaError_t
  bool Blas(int status, const char* what);
  template <typename T>
  bool Alloc(T** p, size_t count);
  bool Reserve(int batch);  // activation buffers for `batch` samples
  // Row-major C = alpha op(A) op(B) + beta C through cuBLAS (column-major: operands swapped).
  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc);
  void Forward(const uint8_t* pixels, bool pixels_on_device, int batch);
  // ForwardBackward's work; calls ready(l) after layer l's gradients, stops at an error.
  void Backward(const uint8_t* pixels, bool pixels_on_device, const int32_t* labels, int batch,
                double scale, const std::function<void(int layer)>& ready);
  absl::Status Wait();

  const std::vector<int> sizes_;
  const std::vector<LayerRange> layers_;
  const std::array<float, 3> mean_, stddev_;
  const std::unique_ptr<device::CudaRuntime> cuda_;
  void* stream_ = nullptr;
  cublasContext* blas_ = nullptr;
  std::vector<void*> events_;
  std::vector<void*> owned_;  // every device allocation, freed at destruction
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* momentum_ = nullptr;
  bool started_ = false;
  uint32_t* nonfinite_ = nullptr;
  int capacity_ = 0;  // samples the buffers below hold
  uint8_t* pixels_ = nullptr;
  int32_t* labels_ = nullptr;
  int32_t* predicted_ = nullptr;
  float* x_ = nullptr;
  std::vector<float*>
      act_;  // act_[l]: output of layer l - 1 (input of layer l), l >= 1; back(): logits
  float* delta_ = nullptr;
  float* delta_prev_ = nullptr;
  // Each ForwardBackward's per-sample losses stay on the device until TakeLoss reads them all
  // back at once (no host wait inside a step). Buffers of capacity_ doubles, reused per step.
  struct PendingLoss {
    double* device;
    int batch;
    int capacity;  // its size: a buffer from before the last growth is not reused
  };
  std::vector<PendingLoss> pending_losses_;
  std::vector<double*> free_losses_;
  absl::Status status_;
};

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_DEVICE_MLP_H_
