// The CUDA runtime calls ddpio's host code makes, behind one interface. Its implementation
// (cuda_runtime_cuda.cc) calls libcudart, opened on first use (lazy_library.h), when the toolkit
// is found, and in tests
// against the stand-in for libcudart (tests/gpu_standin/cuda_standin.cc), so the callers' code and
// this implementation run unchanged there: the loader's pinned staging and the group feeder's
// device path are tested on any machine. Callers need no CUDA header: streams and events are
// opaque handles. Every call returns a Status naming the CUDA error; none throws.
// Thread-safe as the CUDA runtime is: any thread may call, each call selects the device first.
#ifndef DDPIO_DEVICE_CUDA_RUNTIME_H_
#define DDPIO_DEVICE_CUDA_RUNTIME_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpio::device {

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

class CudaRuntime {
 public:
  virtual ~CudaRuntime() = default;

  // The device every call acts on.
  virtual int device() const = 0;
  // Makes the device current on the calling thread (cudaSetDevice), for the libraries called
  // beside the runtime (NCCL, cuBLAS, kernels), which act on the current device.
  virtual absl::Status Activate() = 0;

  // Page-locked host memory the device can DMA from (cudaHostAlloc).
  virtual absl::Status HostAlloc(void** ptr, size_t bytes) = 0;
  virtual void HostFree(void* ptr) = 0;
  virtual absl::Status DeviceAlloc(void** ptr, size_t bytes) = 0;
  virtual void DeviceFree(void* ptr) = 0;
  virtual absl::StatusOr<void*> CreateStream() = 0;  // non-blocking stream
  virtual void DestroyStream(void* stream) = 0;
  virtual absl::StatusOr<void*> CreateEvent() = 0;  // without timing
  virtual void DestroyEvent(void* event) = 0;

  // Queues a copy on `stream` (cudaMemcpyAsync). A copy into pageable host memory returns only
  // once it is done.
  virtual absl::Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                                 void* stream) = 0;
  absl::Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) {
    return CopyAsync(dst, src, bytes, CopyKind::kHostToDevice, stream);
  }
  // Queues setting `bytes` bytes of device memory at `dst` to `value` (cudaMemsetAsync).
  virtual absl::Status MemsetAsync(void* dst, int value, size_t bytes, void* stream) = 0;
  // Blocks the calling host thread until all work queued on `stream` is done
  // (cudaStreamSynchronize); the error of any of that work, if it failed.
  virtual absl::Status SyncStream(void* stream) = 0;
  virtual absl::Status RecordEvent(void* event, void* stream) = 0;
  // Work queued on `stream` after this call waits for the event's last record before it
  // (cudaStreamWaitEvent); the host does not wait.
  virtual absl::Status StreamWaitEvent(void* stream, void* event) = 0;
  // Blocks the calling host thread until the event has completed.
  virtual absl::Status WaitEvent(void* event) = 0;
  // Whether all work queued on `stream` has finished (cudaStreamQuery), without blocking. "Not
  // yet" is an answer, not an error: it is also cleared from the thread's last CUDA error, where
  // the next kernel launch checked with cudaGetLastError would take it for its own failure.
  virtual absl::StatusOr<bool> StreamIdle(void* stream) = 0;
};

// The real runtime when ddpio was built with CUDA and `device` is usable (Probe() says how many
// are); otherwise nullptr and `why_not` says why (e.g. "cudaGetDeviceCount: error 35
// cudaErrorInsufficientDriver", "built without CUDA"). Every call of the runtime acts on
// `device` (cudaSetDevice first: the current device is per thread, and the loader calls from its
// workers), so one process can stage onto its rank's GPU (DeviceForRank in probe.h).
std::unique_ptr<CudaRuntime> MakeCudaRuntime(std::string* why_not, int device = 0);

// The runtime of a rank's device: `device` when it is >= 0, else DeviceForRank(local_rank, the
// probed device count). FailedPrecondition without a usable device (the probe's reason in the
// message); InvalidArgument for a device this machine does not have.
absl::StatusOr<std::unique_ptr<CudaRuntime>> OpenDeviceForRank(int local_rank, int device = -1);

}  // namespace ddpio::device

#endif  // DDPIO_DEVICE_CUDA_RUNTIME_H_
