// The GPU stand-in's own interface (cuda_standin.cc), for the stand-ins of the other libraries
// (nccl_standin.cc, cublas_standin.cc, kernels_standin.cc) and for tests: running host work on a
// "stream" — in order with everything else queued on it, on that stream's thread — and what the
// code under test called. Test-only.
#ifndef DDPIO_TESTS_GPU_STANDIN_STANDIN_H_
#define DDPIO_TESTS_GPU_STANDIN_STANDIN_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace ddpio::standin {

// Queues `work` on `stream` (nullptr: the default stream) and returns at once.
void Enqueue(cudaStream_t stream, std::function<void()> work);
// Whether [p, p + bytes) lies in one cudaMalloc allocation ("device" memory).
bool IsDeviceMemory(const void* p, size_t bytes);

// Calls made since the process started (every thread's); tests compare two readings.
struct Tally {
  int host_allocs = 0, host_frees = 0;      // cudaHostAlloc, cudaFreeHost
  int device_allocs = 0, device_frees = 0;  // cudaMalloc, cudaFree (successful)
  int copies = 0;                           // cudaMemcpyAsync
  int event_records = 0;                    // cudaEventRecord
  int event_waits = 0;                      // cudaEventSynchronize + cudaStreamWaitEvent
  int waits_on_unrecorded = 0;              // ... of an event never recorded (a missed ordering)
  int live_events = 0;                      // created and not yet destroyed
  int live_streams = 0;
};
Tally Counts();
// The calls made since `before` was read (the difference of each count).
Tally CountsSince(const Tally& before);

// Lets only `budget` more cudaHostAlloc calls succeed (the next is cudaErrorMemoryAllocation);
// -1 lifts the limit.
void LimitPinnedAllocations(int budget);

}  // namespace ddpio::standin

#endif  // DDPIO_TESTS_GPU_STANDIN_STANDIN_H_
