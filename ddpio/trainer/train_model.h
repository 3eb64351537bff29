// The model a training run trains, wherever it lives:
//  - on the CPU: Mlp + Sgd in host memory, products on OpenBLAS or (staged per product) cuBLAS;
//  - on a CUDA device: DeviceMlp, parameters, gradients and momentum in device memory.
// Parameters and gradients are in the memory the world communicator moves (host for Gloo,
// device for NCCL), so the run broadcasts and all-reduces them in place.
#ifndef DDPIO_TRAINER_TRAIN_MODEL_H_
#define DDPIO_TRAINER_TRAIN_MODEL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/loader/loader.h"
#include "ddpio/trainer/blas.h"
#include "ddpio/trainer/mlp.h"

namespace ddpio::trainer {

struct ModelOptions {
  std::vector<int> sizes;  // inputs, hidden..., classes
  uint64_t init_seed = 0;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  std::array<float, 3> mean{}, stddev{};  // input normalisation (the loader's)
  // A token model (context > 0): samples are windows of seq_len + 1 ids, and the inputs are
  // `context` one-hot ids of sizes.back() (the vocabulary) each: sizes.front() = context * vocab.
  int context = 0;
  uint64_t seq_len = 0;
};

class TrainModel {
 public:
  virtual ~TrainModel() = default;
  virtual std::string Describe()
      const = 0;  // the path, e.g. "cpu: OpenBLAS ..." or "cuda: ... on device 0"
  virtual float* params() = 0;
  virtual float* grads() = 0;
  virtual size_t num_params() const = 0;
  virtual const std::vector<LayerRange>& layers() const = 0;
  // An event recorded after layer l's gradients on the model's stream (device), for the
  // all-reduce to wait for; null on the CPU, where a layer is ready when it is reported.
  virtual void* layer_event(int /*layer*/) { return nullptr; }

  // Adds the batch's gradients (its pixels from Batch::device_data when set, else Batch::data);
  // the batch must stay valid until TakeLoss returns. on_layer_ready as Mlp's.
  virtual void ForwardBackward(const loader::Batch& b, double scale,
                               const std::function<void(int layer)>& ready) = 0;
  // The summed loss of every ForwardBackward since the last call (waits for the device).
  virtual absl::StatusOr<double> TakeLoss() = 0;
  virtual absl::StatusOr<bool> GradientsFinite() = 0;
  virtual void Step(double lr) = 0;
  virtual void ZeroGrad() = 0;
  virtual absl::Status Predict(const loader::Batch& b, std::vector<int>* classes) = 0;
  // Host copies of the state, for checkpoints and results; and back, for resume.
  virtual absl::Status GetState(std::vector<float>* params, std::vector<float>* momentum,
                                bool* started) = 0;
  virtual absl::Status SetState(const std::vector<float>& params,
                                const std::vector<float>& momentum, bool started) = 0;
  virtual absl::Status status() const = 0;  // the first engine error, sticky
};

// The CPU model; products on `engine` (SelectMatMul's), which it keeps.
std::unique_ptr<TrainModel> MakeCpuModel(const ModelOptions& options,
                                         std::unique_ptr<MatMul> engine, std::string engine_path);
// Whether this ddpio can put the model on a device (built with nvcc and cuBLAS).
bool DeviceModelCompiled();
// The model on this process's CUDA device `device`, initialised with `initial` (an Mlp's
// parameters for the same options). FailedPrecondition when ddpio was built without the CUDA
// toolkit's compiler and cuBLAS (device_model_none.cc).
absl::StatusOr<std::unique_ptr<TrainModel>> MakeDeviceModel(const ModelOptions& options,
                                                            const std::vector<float>& initial,
                                                            int device);

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_TRAIN_MODEL_H_
