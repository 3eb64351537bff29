// The loader stages batches through the device module's CUDA runtime (device/cuda_runtime.h);
// these are its names inside the loader, for the loader's headers and their callers.
#ifndef DDPIO_LOADER_CUDA_RUNTIME_H_
#define DDPIO_LOADER_CUDA_RUNTIME_H_

#include "ddpio/device/cuda_runtime.h"

namespace ddpio::loader {

using device::CudaRuntime;
using device::MakeCudaRuntime;

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_CUDA_RUNTIME_H_
