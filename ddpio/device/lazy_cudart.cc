// The CUDA runtime functions ddpio calls, opened on first use (lazy_library.h). Linked into
// ddpio in place of libcudart; the CUDA stand-in (tests/gpu_standin/cuda_standin.cc) overrides
// them in tests. When the runtime does not load, every call returns
// cudaErrorSharedObjectInitFailed and cudaGetErrorString says which library and why.
#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/device/gpu_libraries.h"
#include "ddpio/device/internal/lazy_forward.h"

namespace {

using ddpio::device::CudaRuntimeLibrary;
constexpr cudaError_t kMissing = cudaErrorSharedObjectInitFailed;

}  // namespace

extern "C" {

DDPIO_LAZY_WEAK cudaError_t cudaGetDeviceCount(int* count) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaGetDeviceCount, kMissing, count);
}
DDPIO_LAZY_WEAK cudaError_t cudaSetDevice(int device) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaSetDevice, kMissing, device);
}
DDPIO_LAZY_WEAK cudaError_t cudaGetLastError() {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaGetLastError, kMissing);
}
DDPIO_LAZY_WEAK cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaStreamCreateWithFlags, kMissing, stream, flags);
}
DDPIO_LAZY_WEAK cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaStreamDestroy, kMissing, stream);
}
DDPIO_LAZY_WEAK cudaError_t cudaStreamQuery(cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaStreamQuery, kMissing, stream);
}
DDPIO_LAZY_WEAK cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaStreamSynchronize, kMissing, stream);
}
DDPIO_LAZY_WEAK cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                                unsigned int flags) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaStreamWaitEvent, kMissing, stream, event, flags);
}
DDPIO_LAZY_WEAK cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaEventCreateWithFlags, kMissing, event, flags);
}
DDPIO_LAZY_WEAK cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaEventRecord, kMissing, event, stream);
}
DDPIO_LAZY_WEAK cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaEventSynchronize, kMissing, event);
}
DDPIO_LAZY_WEAK cudaError_t cudaEventDestroy(cudaEvent_t event) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaEventDestroy, kMissing, event);
}
DDPIO_LAZY_WEAK cudaError_t cudaMalloc(void** ptr, size_t size) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaMalloc, kMissing, ptr, size);
}
DDPIO_LAZY_WEAK cudaError_t cudaFree(void* ptr) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaFree, kMissing, ptr);
}
DDPIO_LAZY_WEAK cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaHostAlloc, kMissing, ptr, size, flags);
}
DDPIO_LAZY_WEAK cudaError_t cudaFreeHost(void* ptr) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaFreeHost, kMissing, ptr);
}
DDPIO_LAZY_WEAK cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                            cudaMemcpyKind kind, cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaMemcpyAsync, kMissing, dst, src, count, kind,
                     stream);
}
DDPIO_LAZY_WEAK cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count,
                                            cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaMemsetAsync, kMissing, ptr, value, count, stream);
}
// Without the runtime, these two still answer: the name of kMissing, and why the library did not
// load — what the probe (probe_cuda.cc) puts in `ddpio info`.
DDPIO_LAZY_WEAK const char* cudaGetErrorName(cudaError_t error) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaGetErrorName,
                     error == kMissing ? "cudaErrorSharedObjectInitFailed" : "cudaError", error);
}
DDPIO_LAZY_WEAK const char* cudaGetErrorString(cudaError_t error) {
  DDPIO_LAZY_FORWARD(CudaRuntimeLibrary(), cudaGetErrorString, CudaRuntimeLibrary().error(), error);
}

}  // extern "C"
