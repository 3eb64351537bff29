// Compiled with the CUDA runtime's headers; bound to libcudart, opened on first use, in ddpio
// (lazy_cudart.cc; never the
// toolkit's placeholder libcuda) and against the stand-in in tests/gpu_standin.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "ddpio/device/probe.h"

namespace ddpio::device::internal {

void ProbeCuda(DeviceInfo* info) {
  info->cuda_compiled = true;
  int count = 0;  // the runtime leaves it untouched on error
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info->devices = 0;
    info->why = absl::StrCat("cudaGetDeviceCount: error ", static_cast<int>(err), " ",
                             cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
    return;
  }
  info->devices = count;
  if (count == 0) info->why = "cudaGetDeviceCount: 0 devices";
}

}  // namespace ddpio::device::internal
