// MakeDeviceModel in a ddpio built without the CUDA toolkit's compiler and cuBLAS.
#include "ddpio/common/status_macros.h"
#include "ddpio/trainer/train_model.h"

namespace ddpio::trainer {

absl::StatusOr<std::unique_ptr<TrainModel>> MakeDeviceModel(const ModelOptions&,
                                                            const std::vector<float>&, int) {
  return WithSetting(
      absl::FailedPreconditionError(
          "this ddpio was built without the CUDA toolkit (nvcc and cuBLAS): the model cannot live "
          "on a device; train with the model on the host (TrainOptions::device cpu)"),
      "device");
}

bool DeviceModelCompiled() { return false; }

}  // namespace ddpio::trainer
