// What the stand-ins for cuBLAS and ddpio's kernels share with the CUDA stand-in
// (nccl_standin.cc): running host work on a "stream" — in order with everything else queued on
// it, on that stream's thread. Test-only.
#ifndef DDPIO_TESTS_NCCL_STANDIN_STANDIN_STREAM_H_
#define DDPIO_TESTS_NCCL_STANDIN_STANDIN_STREAM_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace ddpio::standin {

// Queues `work` on `stream` (nullptr: the default stream) and returns at once.
void Enqueue(cudaStream_t stream, std::function<void()> work);
// Whether [p, p + bytes) lies in one cudaMalloc allocation ("device" memory).
bool IsDeviceMemory(const void* p, size_t bytes);

}  // namespace ddpio::standin

#endif  // DDPIO_TESTS_NCCL_STANDIN_STANDIN_STREAM_H_
