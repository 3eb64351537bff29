// TrainModel on a CUDA device (DeviceMlp, over the device module's CudaRuntime). Compiled with
// the cuBLAS headers; in ddpio its functions bind to the forwarders that open libcudart,
// libcublas and the kernels on first use (device/lazy_library.h), in tests to the stand-ins.
#include "absl/strings/str_cat.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/trainer/device_mlp.h"
#include "ddpio/trainer/train_model.h"

namespace ddpio::trainer {
namespace {

class DeviceModel : public TrainModel {
 public:
  DeviceModel(std::unique_ptr<DeviceMlp> mlp, const ModelOptions& o, int device)
      : mlp_(std::move(mlp)),
        momentum_(static_cast<float>(o.momentum)),
        weight_decay_(static_cast<float>(o.weight_decay)),
        device_(device) {}

  std::string Describe() const override {
    return absl::StrCat("cuda: model resident on device ", device_,
                        " (cuBLAS products, ddpio kernels, gradients all-reduced on the device)");
  }
  float* params() override { return mlp_->params(); }
  float* grads() override { return mlp_->grads(); }
  size_t num_params() const override { return mlp_->num_params(); }
  const std::vector<LayerRange>& layers() const override { return mlp_->layers(); }
  void* layer_event(int layer) override { return mlp_->layer_event(layer); }

  void ForwardBackward(const loader::Batch& b, double scale,
                       const std::function<void(int layer)>& ready) override {
    mlp_->ForwardBackward(Pixels(b), b.device_data != nullptr, b.labels, static_cast<int>(b.size),
                          scale, ready);
  }
  absl::StatusOr<double> TakeLoss() override { return mlp_->TakeLoss(); }
  absl::StatusOr<bool> GradientsFinite() override { return mlp_->GradientsFinite(); }
  void Step(double lr) override { mlp_->Step(static_cast<float>(lr), momentum_, weight_decay_); }
  void ZeroGrad() override { mlp_->ZeroGrad(); }
  absl::Status Predict(const loader::Batch& b, std::vector<int>* classes) override {
    return mlp_->Predict(Pixels(b), b.device_data != nullptr, static_cast<int>(b.size), classes);
  }
  absl::Status GetState(std::vector<float>* params, std::vector<float>* momentum,
                        bool* started) override {
    absl::Status st = mlp_->GetParams(params);
    return st.ok() ? mlp_->GetMomentum(momentum, started) : st;
  }
  absl::Status SetState(const std::vector<float>& params, const std::vector<float>& momentum,
                        bool started) override {
    return mlp_->SetState(params, momentum, started);
  }
  absl::Status status() const override { return mlp_->status(); }

 private:
  static const uint8_t* Pixels(const loader::Batch& b) {
    return b.device_data != nullptr ? static_cast<const uint8_t*>(b.device_data) : b.data;
  }
  std::unique_ptr<DeviceMlp> mlp_;
  const float momentum_, weight_decay_;
  const int device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TrainModel>> MakeDeviceModel(const ModelOptions& options,
                                                            const std::vector<float>& initial,
                                                            int device) {
  std::string why;
  std::unique_ptr<device::CudaRuntime> cuda = device::MakeCudaRuntime(&why, device);
  if (cuda == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the device model needs CUDA device ", device, ": ", why));
  }
  auto mlp =
      DeviceMlp::Create(std::move(cuda), options.sizes, initial, options.mean, options.stddev);
  if (!mlp.ok()) return mlp.status();
  return std::unique_ptr<TrainModel>(new DeviceModel(*std::move(mlp), options, device));
}

bool DeviceModelCompiled() { return true; }

}  // namespace ddpio::trainer
