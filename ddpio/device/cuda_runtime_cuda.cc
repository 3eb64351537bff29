// Compiled with the CUDA runtime's headers; bound to libcudart (opened on first use:
// lazy_cudart.cc) in ddpio and to the
// stand-in in tests/gpu_standin.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/device/probe.h"

namespace ddpio::device {
namespace {

absl::Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), " ", cudaGetErrorString(err)));
}

cudaMemcpyKind KindOf(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

// Every call acts on the runtime's device (the current device is per thread).
#define DDPIO_CUDA_ON_DEVICE      \
  do {                            \
    absl::Status on = Activate(); \
    if (!on.ok()) return on;      \
  } while (0)

class RealCudaRuntime : public CudaRuntime {
 public:
  explicit RealCudaRuntime(int device) : device_(device) {}

  int device() const override { return device_; }
  absl::Status Activate() override { return Check(cudaSetDevice(device_), "cudaSetDevice"); }

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
    absl::Status st =
        Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
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
    absl::Status st =
        Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    if (!st.ok()) return st;
    return static_cast<void*>(e);
  }
  void DestroyEvent(void* event) override {
    cudaSetDevice(device_);
    cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                         void* stream) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaMemcpyAsync(dst, src, bytes, KindOf(kind), static_cast<cudaStream_t>(stream)),
                 "cudaMemcpyAsync");
  }
  absl::Status MemsetAsync(void* dst, int value, size_t bytes, void* stream) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)),
                 "cudaMemsetAsync");
  }
  absl::Status SyncStream(void* stream) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  }
  absl::Status RecordEvent(void* event, void* stream) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(
        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)),
        "cudaEventRecord");
  }
  absl::Status StreamWaitEvent(void* stream, void* event) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
        "cudaStreamWaitEvent");
  }
  absl::Status WaitEvent(void* event) override {
    DDPIO_CUDA_ON_DEVICE;
    return Check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
  }
  absl::StatusOr<bool> StreamIdle(void* stream) override {
    DDPIO_CUDA_ON_DEVICE;
    const cudaError_t q = cudaStreamQuery(static_cast<cudaStream_t>(stream));
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) return Check(q, "cudaStreamQuery");
    (void)cudaGetLastError();  // "not ready" is no error of the next launch
    return false;
  }

 private:
  const int device_;
};

#undef DDPIO_CUDA_ON_DEVICE

}  // namespace

std::unique_ptr<CudaRuntime> MakeCudaRuntime(std::string* why_not, int device) {
  const DeviceInfo& info = Probe();
  if (info.devices <= 0) {
    if (why_not != nullptr) *why_not = info.why;
    return nullptr;
  }
  if (device < 0 || device >= info.devices) {
    if (why_not != nullptr)
      *why_not = absl::StrCat("no CUDA device ", device, " (this machine has ", info.devices, ")");
    return nullptr;
  }
  return std::make_unique<RealCudaRuntime>(device);
}

}  // namespace ddpio::device
