// Host memory for batch slots: the fastest kind this machine allows for host-to-device copies.
//
//   kCudaPinned  cudaHostAlloc, when a CUDA runtime with a usable device is given;
//   kLocked      page-aligned memory locked with mlock, when RLIMIT_MEMLOCK allows;
//   kPlain       page-aligned memory.
// Allocation happens once per slot at loader start; the kind is logged once per process.
#ifndef DDPIO_LOADER_HOST_MEMORY_H_
#define DDPIO_LOADER_HOST_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/device/cuda_runtime.h"

namespace ddpio::loader {

enum class HostMemoryKind { kCudaPinned, kLocked, kPlain };
std::string HostMemoryKindName(HostMemoryKind kind);

// Owns one block. Move-only.
class HostBuffer {
 public:
  HostBuffer() = default;
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  HostMemoryKind kind() const { return kind_; }

 private:
  friend absl::StatusOr<HostBuffer> AllocateHostBuffer(size_t, device::CudaRuntime*, bool);
  void Release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
  HostMemoryKind kind_ = HostMemoryKind::kPlain;
  device::CudaRuntime* cuda_ = nullptr;
};

// `cuda` may be null (no device). With `try_lock` false, skips mlock. ResourceExhausted when
// memory cannot be had.
absl::StatusOr<HostBuffer> AllocateHostBuffer(size_t bytes, device::CudaRuntime* cuda,
                                              bool try_lock = true);

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_HOST_MEMORY_H_
