// Compiled only when the CUDA toolkit was found.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "ddpio/common/accelerator.h"
#include "ddpio/loader/cuda_runtime.h"

namespace ddpio::loader {
namespace {

absl::Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err), " ",
                                          cudaGetErrorString(err)));
}

// Every call acts on the runtime's device (the current device is per thread).
#define DDPIO_CUDA_ON_DEVICE                                                    \
  do {                                                                          \
    absl::Status on = Check(cudaSetDevice(device_), "cudaSetDevice");           \
    if (!on.ok()) return on;                                                    \
  } while (0)

class RealCudaRuntime : public CudaRuntime {
 public:
  explicit RealCudaRuntime(int device) : device_(device) {}
  absl::Status HostAlloc(void** ptr, size_t bytes) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaHostAlloc(ptr, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  }
  void HostFree(void* ptr) override {
    cudaSetDevice(device_);
    cudaFreeHost(ptr);
  }
  absl::Status DeviceAlloc(void** ptr, size_t bytes) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaMalloc(ptr, bytes), "cudaMalloc");
  }
  void DeviceFree(void* ptr) override {
    cudaSetDevice(device_);
    cudaFree(ptr);
  }
  absl::StatusOr<void*> CreateStream() override {
    DDPIO_CUDA_ON_DEVICE;
    cudaStream_t s = nullptr;
    absl::Status st = Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!st.ok()) return st;
    return static_cast<void*>(s);
  }
  void DestroyStream(void* stream) override {
    cudaSetDevice(device_);
    cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }
  absl::StatusOr<void*> CreateEvent() override {
    DDPIO_CUDA_ON_DEVICE;
    cudaEvent_t e = nullptr;
    absl::Status st = Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    if (!st.ok()) return st;
    return static_cast<void*>(e);
  }
  void DestroyEvent(void* event) override {
    cudaSetDevice(device_);
    cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
  absl::Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                 static_cast<cudaStream_t>(stream)),
                 "cudaMemcpyAsync");
  }
  absl::Status RecordEvent(void* event, void* stream) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
                 "cudaEventRecord");
  }
  absl::Status WaitEvent(void* event) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
  }

 private:
  const int device_;
};

}  // namespace

std::unique_ptr<CudaRuntime> MakeCudaRuntime(std::string* why_not, int device) {
  const AcceleratorInfo& info = ProbeAccelerator();
  if (info.cuda_devices <= 0) {
    if (why_not != nullptr) *why_not = info.why;
    return nullptr;
  }
  if (device < 0 || device >= info.cuda_devices) {
    if (why_not != nullptr) *why_not = absl::StrCat("no CUDA device ", device, " (this machine has ", info.cuda_devices, ")");
    return nullptr;
  }
  return std::make_unique<RealCudaRuntime>(device);
}

}  // namespace ddpio::loader
