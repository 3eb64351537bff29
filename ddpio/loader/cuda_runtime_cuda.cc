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

class RealCudaRuntime : public CudaRuntime {
 public:
  absl::Status HostAlloc(void** ptr, size_t bytes) override {
    return Check(cudaHostAlloc(ptr, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  }
  void HostFree(void* ptr) override { cudaFreeHost(ptr); }
  absl::Status DeviceAlloc(void** ptr, size_t bytes) override {
    return Check(cudaMalloc(ptr, bytes), "cudaMalloc");
  }
  void DeviceFree(void* ptr) override { cudaFree(ptr); }
  absl::StatusOr<void*> CreateStream() override {
    cudaStream_t s = nullptr;
    absl::Status st = Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!st.ok()) return st;
    return static_cast<void*>(s);
  }
  void DestroyStream(void* stream) override { cudaStreamDestroy(static_cast<cudaStream_t>(stream)); }
  absl::StatusOr<void*> CreateEvent() override {
    cudaEvent_t e = nullptr;
    absl::Status st = Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    if (!st.ok()) return st;
    return static_cast<void*>(e);
  }
  void DestroyEvent(void* event) override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
  absl::Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) override {
    return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                 static_cast<cudaStream_t>(stream)),
                 "cudaMemcpyAsync");
  }
  absl::Status RecordEvent(void* event, void* stream) override {
    return Check(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
                 "cudaEventRecord");
  }
  absl::Status WaitEvent(void* event) override {
    return Check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
  }
};

}  // namespace

std::unique_ptr<CudaRuntime> MakeCudaRuntime(std::string* why_not) {
  const AcceleratorInfo& info = ProbeAccelerator();
  if (info.cuda_devices <= 0) {
    if (why_not != nullptr) *why_not = info.why;
    return nullptr;
  }
  return std::make_unique<RealCudaRuntime>();
}

}  // namespace ddpio::loader
