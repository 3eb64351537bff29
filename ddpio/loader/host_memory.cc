#include "ddpio/loader/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/log.h"

namespace ddpio::loader {

namespace {
constexpr EnumName<HostMemoryKind> kHostMemoryKinds[] = {
    {HostMemoryKind::kCudaPinned, "cuda-pinned"},
    {HostMemoryKind::kLocked, "page-locked"},
    {HostMemoryKind::kPlain, "plain"}};
}  // namespace

std::string HostMemoryKindName(HostMemoryKind kind) { return NameOf(kHostMemoryKinds, kind); }

HostBuffer::~HostBuffer() { Release(); }

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(o.size_),
      mapped_(o.mapped_),
      kind_(o.kind_),
      cuda_(o.cuda_) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
    mapped_ = o.mapped_;
    kind_ = o.kind_;
    cuda_ = o.cuda_;
  }
  return *this;
}

void HostBuffer::Release() {
  if (data_ == nullptr) return;
  if (kind_ == HostMemoryKind::kCudaPinned) {
    cuda_->HostFree(data_);
  } else {
    if (kind_ == HostMemoryKind::kLocked) munlock(data_, mapped_);
    munmap(data_, mapped_);
  }
  data_ = nullptr;
}

absl::StatusOr<HostBuffer> AllocateHostBuffer(size_t bytes, device::CudaRuntime* cuda,
                                              bool try_lock) {
  static std::atomic<int> logged{-1};
  HostBuffer b;
  b.size_ = bytes;
  if (cuda != nullptr) {
    void* p = nullptr;
    absl::Status st = cuda->HostAlloc(&p, bytes == 0 ? 1 : bytes);
    if (!st.ok())
      return absl::ResourceExhaustedError(absl::StrCat("pinned host memory: ", st.message()));
    b.data_ = static_cast<uint8_t*>(p);
    b.kind_ = HostMemoryKind::kCudaPinned;
    b.cuda_ = cuda;
  } else {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    b.mapped_ = ((bytes == 0 ? 1 : bytes) + page - 1) / page * page;
    void* p = mmap(nullptr, b.mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", bytes, " bytes of host memory"));
    }
    b.data_ = static_cast<uint8_t*>(p);
    b.kind_ =
        try_lock && mlock(p, b.mapped_) == 0 ? HostMemoryKind::kLocked : HostMemoryKind::kPlain;
  }
  int kind = static_cast<int>(b.kind_);
  if (logged.exchange(kind) != kind) {
    DDPIO_LOG(INFO) << "batch slots use " << HostMemoryKindName(b.kind_) << " host memory"
                    << (b.kind_ == HostMemoryKind::kPlain
                            ? " (no CUDA device, and mlock refused: RLIMIT_MEMLOCK too low)"
                        : b.kind_ == HostMemoryKind::kLocked ? " (no CUDA device)"
                                                             : "");
  }
  return b;
}

}  // namespace ddpio::loader
