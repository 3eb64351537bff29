#include "ddpio/common/accelerator.h"

namespace ddpio::internal {

void ProbeCuda(AcceleratorInfo* info) {
  info->cuda_compiled = false;
  info->cuda_devices = 0;
  info->why = "built without CUDA";
}

}  // namespace ddpio::internal
