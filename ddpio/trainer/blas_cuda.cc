// Compiled only when the CUDA toolkit was found. Links cuBLAS; memory, copies and the stream go
// through the device module's CudaRuntime. Never the driver stub: without a driver, MakeCublas()
// reports Unavailable and the CPU engine is used.
#include <cublas_v2.h>

#include "absl/strings/str_cat.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/trainer/blas.h"

namespace ddpio::trainer {
namespace {

using device::CopyKind;

// A device buffer that only grows.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(device::CudaRuntime& cuda) : cuda_(cuda) {}
  ~DeviceBuffer() { Free(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  absl::Status Reserve(size_t n) {
    if (n <= floats_) return absl::OkStatus();
    Free();
    void* raw = nullptr;
    absl::Status st = cuda_.DeviceAlloc(&raw, n * sizeof(float));
    if (!st.ok()) return st;
    ptr_ = static_cast<float*>(raw);
    floats_ = n;
    return absl::OkStatus();
  }
  float* get() const { return ptr_; }

 private:
  void Free() {
    if (ptr_ != nullptr) cuda_.DeviceFree(ptr_);
    ptr_ = nullptr;
    floats_ = 0;
  }
  device::CudaRuntime& cuda_;
  float* ptr_ = nullptr;
  size_t floats_ = 0;
};

class Cublas : public MatMul {
 public:
  Cublas(std::unique_ptr<device::CudaRuntime> cuda, cublasHandle_t handle, void* stream)
      : cuda_(std::move(cuda)),
        handle_(handle),
        stream_(stream),
        a_(*cuda_),
        b_(*cuda_),
        c_(*cuda_) {}
  ~Cublas() override {
    cublasDestroy(handle_);
    cuda_->DestroyStream(stream_);
  }

  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    if (!status_.ok() || m == 0 || n == 0) return;
    const size_t a_n = static_cast<size_t>(trans_a ? k : m) * lda,
                 b_n = static_cast<size_t>(trans_b ? n : k) * ldb;
    const size_t c_n = static_cast<size_t>(m) * ldc;
    if (!Ok(a_.Reserve(a_n)) || !Ok(b_.Reserve(b_n)) || !Ok(c_.Reserve(c_n)) ||
        !Ok(cuda_->CopyAsync(a_.get(), a, a_n * sizeof(float), CopyKind::kHostToDevice, stream_)) ||
        !Ok(cuda_->CopyAsync(b_.get(), b, b_n * sizeof(float), CopyKind::kHostToDevice, stream_)) ||
        (beta != 0.0f && !Ok(cuda_->CopyAsync(c_.get(), c, c_n * sizeof(float),
                                              CopyKind::kHostToDevice, stream_)))) {
      return;
    }
    // cuBLAS acts on the calling thread's current device: the runtime's (its calls above made it
    // current on this thread).
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    const cublasStatus_t st = cublasSgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                          b_.get(), ldb, a_.get(), lda, &beta, c_.get(), ldc);
    if (st != CUBLAS_STATUS_SUCCESS) {
      status_ = absl::InternalError(absl::StrCat("cublasSgemm: ", cublasGetStatusString(st)));
      return;
    }
    if (!Ok(cuda_->CopyAsync(c, c_.get(), c_n * sizeof(float), CopyKind::kDeviceToHost, stream_)))
      return;
    Ok(cuda_->SyncStream(stream_));
  }

  absl::Status status() const override { return status_; }
  std::string Describe() const override {
    int version = 0;
    cublasGetVersion(handle_, &version);
    return absl::StrCat("cuda: cuBLAS ", version, " on device ", cuda_->device(),
                        " (operands staged per product)");
  }

 private:
  bool Ok(const absl::Status& st) {
    if (st.ok()) return true;
    status_ = st;
    return false;
  }

  const std::unique_ptr<device::CudaRuntime> cuda_;
  cublasHandle_t handle_;
  void* stream_;
  DeviceBuffer a_, b_, c_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MatMul>> MakeCublas() {
  std::string why;
  std::unique_ptr<device::CudaRuntime> cuda = device::MakeCudaRuntime(&why, 0);
  if (cuda == nullptr) return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", why));
  absl::StatusOr<void*> stream = cuda->CreateStream();
  if (!stream.ok()) return absl::UnavailableError(stream.status().message());
  absl::Status on = cuda->Activate();  // cublasCreate binds the current device
  cublasHandle_t handle = nullptr;
  if (cublasStatus_t st = on.ok() ? cublasCreate(&handle) : CUBLAS_STATUS_NOT_INITIALIZED;
      st != CUBLAS_STATUS_SUCCESS) {
    cuda->DestroyStream(*stream);
    return absl::UnavailableError(on.ok()
                                      ? absl::StrCat("cublasCreate: ", cublasGetStatusString(st))
                                      : std::string(on.message()));
  }
  cublasSetStream(handle, static_cast<cudaStream_t>(*stream));
  return std::unique_ptr<MatMul>(new Cublas(std::move(cuda), handle, *stream));
}

}  // namespace ddpio::trainer
