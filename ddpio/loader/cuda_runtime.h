// The few CUDA runtime calls the loader makes, behind an interface: the real implementation
// (cuda_runtime_cuda.cc, compiled only with the toolkit) and fakes in tests share the loader's
// code. Streams and events are opaque handles. Every call returns a Status naming the CUDA
// error; none throws.
#ifndef DDPIO_LOADER_CUDA_RUNTIME_H_
#define DDPIO_LOADER_CUDA_RUNTIME_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpio::loader {

class CudaRuntime {
 public:
  virtual ~CudaRuntime() = default;
  // Page-locked host memory the device can DMA from (cudaHostAlloc).
  virtual absl::Status HostAlloc(void** ptr, size_t bytes) = 0;
  virtual void HostFree(void* ptr) = 0;
  virtual absl::Status DeviceAlloc(void** ptr, size_t bytes) = 0;
  virtual void DeviceFree(void* ptr) = 0;
  virtual absl::StatusOr<void*> CreateStream() = 0;  // non-blocking stream
  virtual void DestroyStream(void* stream) = 0;
  virtual absl::StatusOr<void*> CreateEvent() = 0;
  virtual void DestroyEvent(void* event) = 0;
  virtual absl::Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) = 0;
  virtual absl::Status RecordEvent(void* event, void* stream) = 0;
  // Blocks the calling host thread until the event has completed.
  virtual absl::Status WaitEvent(void* event) = 0;
};

// The real runtime when ddpio was built with CUDA and a device is usable; otherwise nullptr and
// `why_not` says why (e.g. "cudaGetDeviceCount: error 35 cudaErrorInsufficientDriver"). Every
// call of the runtime acts on `device` (cudaSetDevice first: the current device is per thread,
// and the loader calls from its workers), so one process can stage onto its LOCAL_RANK's GPU.
std::unique_ptr<CudaRuntime> MakeCudaRuntime(std::string* why_not, int device = 0);

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_CUDA_RUNTIME_H_
