#include "ddpio/device/cuda_runtime.h"

namespace ddpio::device {

std::unique_ptr<CudaRuntime> MakeCudaRuntime(std::string* why_not, int /*device*/) {
  if (why_not != nullptr) *why_not = "built without CUDA";
  return nullptr;
}

}  // namespace ddpio::device
