// MakeDeviceModel in a ddpio built without the CUDA toolkit's compiler and cuBLAS.
#include "ddpio/trainer/train_model.h"

namespace ddpio::trainer {

absl::StatusOr<std::unique_ptr<TrainModel>> MakeDeviceModel(const ModelOptions&, const std::vector<float>&, int) {
  return absl::FailedPreconditionError(
      "this ddpio was built without the CUDA toolkit (nvcc and cuBLAS): the model cannot live on a device; "
      "train with --device cpu");
}

bool DeviceModelCompiled() { return false; }

}  // namespace ddpio::trainer
