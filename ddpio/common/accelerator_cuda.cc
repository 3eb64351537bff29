// Compiled only when the CUDA toolkit was found. Links the CUDA runtime, never the driver stub.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "ddpio/common/accelerator.h"

namespace ddpio::internal {

void ProbeCuda(AcceleratorInfo* info) {
  info->cuda_compiled = true;
  int count = 0;  // the runtime leaves it untouched on error
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info->cuda_devices = 0;
    info->why = absl::StrCat("cudaGetDeviceCount: error ", static_cast<int>(err), " ",
                             cudaGetErrorName(err));
    return;
  }
  info->cuda_devices = count;
  if (count == 0) info->why = "cudaGetDeviceCount: 0 devices";
}

}  // namespace ddpio::internal
