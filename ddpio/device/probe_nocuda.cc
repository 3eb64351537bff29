#include "ddpio/device/probe.h"

namespace ddpio::device::internal {

void ProbeCuda(DeviceInfo* info) {
  info->cuda_compiled = false;
  info->devices = 0;
  info->why = "built without CUDA";
}

}  // namespace ddpio::device::internal
