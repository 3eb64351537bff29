// Test-only stand-in for the CUDA runtime functions ddpio calls — the one test double of the GPU
// path: "device" memory is host memory and a stream is a thread running its queue in order. Linked
// in place of libcudart under the device module's real CudaRuntime (ddpio/device), so the loader's
// pinned staging, the group feeder's device path, the NCCL backend (nccl_standin.cc) and the
// trainer's device model (cublas_standin.cc, kernels_standin.cc) run their own code on CPU. Never
// installed, never linked into ddpio.
//
// It includes the real cuda_runtime_api.h, so a signature that drifts from the real library fails
// to compile. What it models of the real semantics:
//   - work (copies, memsets, NCCL operations, kernels) is enqueued on the stream and runs later;
//     a copy takes a while, as a DMA does, so work not ordered after it reads the old bytes;
//     cudaStreamQuery says cudaErrorNotReady while the stream is busy (and leaves it as the
//     thread's last error, as the real runtime may); cudaStreamDestroy does not wait;
//   - events: cudaEventRecord puts a numbered marker on the stream; cudaStreamWaitEvent makes the
//     waiting stream's later work wait for the marker recorded last before the call;
//   - device memory is what cudaMalloc returned: copies, memsets, collectives, cuBLAS and the
//     kernels refuse host pointers on the device side, as the real libraries would fault on them.
// Environment: DDPIO_NCCL_STANDIN_DEVICES = number of devices (default 1; 0 → cudaErrorNoDevice;
// "nodriver" → cudaErrorInsufficientDriver); DDPIO_NCCL_STANDIN_DEVICE_BYTES = device memory.
// Tests read what was called, and limit pinned memory, through standin.h.

#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "tests/gpu_standin/standin.h"

namespace {

constexpr std::chrono::microseconds kCopyLatency(200);

// A queue of host tasks run in order by one thread; shared with that thread, so destroying the
// stream never waits for it.
struct StreamState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool running = false;
  bool stop = false;

  static void Loop(std::shared_ptr<StreamState> s) {
    std::unique_lock<std::mutex> lock(s->mu);
    for (;;) {
      s->cv.wait(lock, [&] { return s->stop || !s->queue.empty(); });
      if (s->queue.empty()) return;
      auto task = std::move(s->queue.front());
      s->queue.pop_front();
      s->running = true;
      lock.unlock();
      task();
      lock.lock();
      s->running = false;
    }
  }
  void Push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(task));
    }
    cv.notify_all();
  }
  bool Idle() {
    std::lock_guard<std::mutex> lock(mu);
    return queue.empty() && !running;
  }
};

// "Device" memory: what cudaMalloc handed out, so that the collectives, copies, cuBLAS and the
// kernels refuse host memory, on which the real ones would fault.
std::mutex device_mu;
std::map<uintptr_t, size_t>* device_ranges = new std::map<uintptr_t, size_t>();

bool IsDevice(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(device_mu);
  auto it = device_ranges->upper_bound(a);
  if (it == device_ranges->begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

int DeviceCount(cudaError_t* err) {
  const char* env = std::getenv("DDPIO_NCCL_STANDIN_DEVICES");
  std::string v = env == nullptr ? "1" : env;
  if (v == "nodriver") {
    *err = cudaErrorInsufficientDriver;
    return 0;
  }
  int n = std::atoi(v.c_str());
  *err = n > 0 ? cudaSuccess : cudaErrorNoDevice;
  return n;
}

// What tests read through standin.h.
std::mutex tally_mu;
ddpio::standin::Tally tally;
int pinned_budget = -1;  // host allocations still allowed; -1: no limit

using ddpio::standin::Tally;
void Count(void (*change)(Tally&)) {
  std::lock_guard<std::mutex> lock(tally_mu);
  change(tally);
}
// A wait for the event's `recorded`-th record: 0 means it was never recorded.
void CountWait(uint64_t recorded) {
  std::lock_guard<std::mutex> lock(tally_mu);
  ++tally.event_waits;
  if (recorded == 0) ++tally.waits_on_unrecorded;
}

// The calling thread's last error. The real runtime may leave cudaErrorNotReady there after a
// query (PyTorch clears it for that reason); the stand-in always does, so that code which does not
// clear it fails its next checked kernel launch (kernels_standin.cc) here as it could on a GPU.
thread_local cudaError_t last_error = cudaSuccess;

}  // namespace

struct CUstream_st {
  std::shared_ptr<StreamState> state;
};

// An event: each record is a numbered marker its stream completes in order; a wait (host or
// stream) is for the number recorded when the wait was made, as CUDA specifies.
// The state is shared with the stream tasks that complete or wait for it, so destroying an
// event with work pending (which CUDA allows) frees nothing still in use.
struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;
  uint64_t completed = 0;
};
struct CUevent_st {
  std::shared_ptr<EventState> state;
};

namespace {

StreamState& DefaultStream() {
  static auto* s = [] {
    auto st = std::make_shared<StreamState>();
    std::thread(StreamState::Loop, st).detach();
    return new std::shared_ptr<StreamState>(st);
  }();
  return **s;
}

StreamState& StateOf(cudaStream_t stream) {
  return stream == nullptr ? DefaultStream() : *stream->state;
}

}  // namespace

namespace ddpio::standin {

void Enqueue(cudaStream_t stream, std::function<void()> work) {
  StateOf(stream).Push(std::move(work));
}

bool IsDeviceMemory(const void* p, size_t bytes) { return IsDevice(p, bytes); }

Tally Counts() {
  std::lock_guard<std::mutex> lock(tally_mu);
  return tally;
}

Tally CountsSince(const Tally& before) {
  const Tally now = Counts();
  Tally d;
  d.host_allocs = now.host_allocs - before.host_allocs;
  d.host_frees = now.host_frees - before.host_frees;
  d.device_allocs = now.device_allocs - before.device_allocs;
  d.device_frees = now.device_frees - before.device_frees;
  d.copies = now.copies - before.copies;
  d.event_records = now.event_records - before.event_records;
  d.event_waits = now.event_waits - before.event_waits;
  d.waits_on_unrecorded = now.waits_on_unrecorded - before.waits_on_unrecorded;
  d.live_events = now.live_events - before.live_events;
  d.live_streams = now.live_streams - before.live_streams;
  return d;
}

void LimitPinnedAllocations(int budget) {
  std::lock_guard<std::mutex> lock(tally_mu);
  pinned_budget = budget;
}

}  // namespace ddpio::standin

// ---- CUDA runtime ----

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  cudaError_t err;
  int n = DeviceCount(&err);
  if (err == cudaSuccess) *count = n;
  return err;
}

cudaError_t cudaSetDevice(int device) {
  cudaError_t err;
  int n = DeviceCount(&err);
  if (err != cudaSuccess) return err;
  return device >= 0 && device < n ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int /*flags*/) {
  auto* s = new CUstream_st{std::make_shared<StreamState>()};
  std::thread(StreamState::Loop, s->state).detach();
  *stream = s;
  Count([](Tally& t) { ++t.live_streams; });
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return cudaErrorInvalidResourceHandle;
  {
    std::lock_guard<std::mutex> lock(stream->state->mu);
    stream->state->stop = true;  // the thread finishes what is queued, then ends
  }
  stream->state->cv.notify_all();
  delete stream;
  Count([](Tally& t) { --t.live_streams; });
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (StateOf(stream).Idle()) return cudaSuccess;
  last_error = cudaErrorNotReady;
  return cudaErrorNotReady;
}

cudaError_t cudaGetLastError() { return std::exchange(last_error, cudaSuccess); }

cudaError_t cudaPeekAtLastError() { return last_error; }

// DDPIO_NCCL_STANDIN_DEVICE_BYTES: the device's memory; an allocation past it fails as
// out-of-memory (unset: no limit).
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (const char* limit = std::getenv("DDPIO_NCCL_STANDIN_DEVICE_BYTES"); limit != nullptr) {
    size_t used = 0;
    std::lock_guard<std::mutex> lock(device_mu);
    for (const auto& [start, size] : *device_ranges) used += size;
    if (used + bytes > std::strtoull(limit, nullptr, 10)) return cudaErrorMemoryAllocation;
  }
  const size_t rounded = (bytes + 255) / 256 * 256;
  *ptr = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (*ptr == nullptr) return cudaErrorMemoryAllocation;
  {
    std::lock_guard<std::mutex> lock(device_mu);
    (*device_ranges)[reinterpret_cast<uintptr_t>(*ptr)] = bytes;
  }
  Count([](Tally& t) { ++t.device_allocs; });
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(device_mu);
    if (device_ranges->erase(reinterpret_cast<uintptr_t>(ptr)) == 0) return cudaErrorInvalidValue;
  }
  std::free(ptr);
  Count([](Tally& t) { ++t.device_frees; });
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  const bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (bytes > 0 && (IsDevice(dst, bytes) != to_device || IsDevice(src, bytes) != from_device)) {
    return cudaErrorInvalidValue;  // a copy whose direction does not match its pointers
  }
  Count([](Tally& t) { ++t.copies; });
  // A copy takes a while, as a DMA does: work not ordered after it (by its stream or an event)
  // reads the old bytes, so a missing cudaStreamWaitEvent shows in tests.
  StateOf(stream).Push([=] {
    std::this_thread::sleep_for(kCopyLatency);
    std::memmove(dst, src, bytes);
  });
  return cudaSuccess;
}

// Page-locked host memory is host memory.
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int /*flags*/) {
  {
    std::lock_guard<std::mutex> lock(tally_mu);
    if (pinned_budget == 0) return cudaErrorMemoryAllocation;
    if (pinned_budget > 0) --pinned_budget;
    ++tally.host_allocs;
  }
  *ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  Count([](Tally& t) { ++t.host_frees; });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (bytes > 0 && !IsDevice(dst, bytes)) return cudaErrorInvalidValue;
  StateOf(stream).Push([=] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> waited = done->get_future();
  StateOf(stream).Push([done] { done->set_value(); });
  waited.wait();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  *event = new CUevent_st{std::make_shared<EventState>()};
  Count([](Tally& t) { ++t.live_events; });
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  delete event;
  Count([](Tally& t) { --t.live_events; });
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<EventState> e = event->state;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    n = ++e->recorded;
  }
  Count([](Tally& t) { ++t.event_records; });
  StateOf(stream).Push([e, n] {
    {
      std::lock_guard<std::mutex> lock(e->mu);
      if (n > e->completed) e->completed = n;
    }
    e->cv.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<EventState> e = event->state;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    n = e->recorded;
  }
  CountWait(n);
  StateOf(stream).Push([e, n] {
    std::unique_lock<std::mutex> lock(e->mu);
    e->cv.wait(lock, [&] { return e->completed >= n; });
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<EventState> e = event->state;
  std::unique_lock<std::mutex> lock(e->mu);
  const uint64_t n = e->recorded;
  CountWait(n);
  e->cv.wait(lock, [&] { return e->completed >= n; });
  return cudaSuccess;
}

const char* cudaGetErrorName(cudaError_t error) {
  return error == cudaSuccess ? "cudaSuccess" : "cudaErrorStandIn";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    default:
      return "stand-in CUDA error";
  }
}

}  // extern "C"
