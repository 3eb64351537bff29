// The test double of device::CudaRuntime (ddpio/device/cuda_runtime.h), for tests on machines
// without a GPU: "device" memory is host memory, copies are immediate, and every call is counted
// so tests can check the call sequence. (tests/nccl_standin replaces the CUDA and NCCL libraries
// themselves, underneath the real runtime, for the code that calls them by name.)
#ifndef DDPIO_TESTS_SUPPORT_FAKE_CUDA_H_
#define DDPIO_TESTS_SUPPORT_FAKE_CUDA_H_

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "ddpio/device/cuda_runtime.h"

namespace ddpio::testing {

class FakeCuda : public device::CudaRuntime {
 public:
  int device() const override { return 0; }
  absl::Status Activate() override { return absl::OkStatus(); }
  absl::Status HostAlloc(void** ptr, size_t bytes) override {
    std::lock_guard<std::mutex> l(mu);
    ++host_allocs;
    *ptr = std::malloc(bytes);
    return absl::OkStatus();
  }
  void HostFree(void* ptr) override {
    std::lock_guard<std::mutex> l(mu);
    ++host_frees;
    std::free(ptr);
  }
  absl::Status DeviceAlloc(void** ptr, size_t bytes) override {
    std::lock_guard<std::mutex> l(mu);
    ++device_allocs;
    *ptr = std::malloc(bytes);
    return absl::OkStatus();
  }
  void DeviceFree(void* ptr) override {
    std::lock_guard<std::mutex> l(mu);
    ++device_frees;
    std::free(ptr);
  }
  absl::StatusOr<void*> CreateStream() override { return static_cast<void*>(&stream_tag); }
  void DestroyStream(void*) override { ++streams_destroyed; }
  absl::StatusOr<void*> CreateEvent() override {
    std::lock_guard<std::mutex> l(mu);
    void* e = new int(0);
    events.insert(e);
    return e;
  }
  void DestroyEvent(void* e) override {
    std::lock_guard<std::mutex> l(mu);
    events.erase(e);
    delete static_cast<int*>(e);
  }
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, device::CopyKind,
                         void*) override {
    std::lock_guard<std::mutex> l(mu);
    ++copies;
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status MemsetAsync(void* dst, int value, size_t bytes, void*) override {
    std::lock_guard<std::mutex> l(mu);
    std::memset(dst, value, bytes);
    return absl::OkStatus();
  }
  absl::Status SyncStream(void*) override { return absl::OkStatus(); }  // copies are immediate
  absl::Status RecordEvent(void* e, void*) override {
    std::lock_guard<std::mutex> l(mu);
    ++*static_cast<int*>(e);  // pending
    ++records;
    return absl::OkStatus();
  }
  absl::Status StreamWaitEvent(void*, void* e) override {
    return WaitEvent(e);
  }  // copies are immediate
  absl::Status WaitEvent(void* e) override {
    std::lock_guard<std::mutex> l(mu);
    if (*static_cast<int*>(e) == 0) ++waits_on_unrecorded;
    *static_cast<int*>(e) = 0;
    ++waits;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> StreamIdle(void*) override { return true; }

  std::mutex mu;
  int host_allocs = 0, host_frees = 0, device_allocs = 0, device_frees = 0;
  int copies = 0, records = 0, waits = 0, waits_on_unrecorded = 0, streams_destroyed = 0;
  std::set<void*> events;
  int stream_tag = 0;
};

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_FAKE_CUDA_H_
