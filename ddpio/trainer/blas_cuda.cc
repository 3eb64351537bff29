// Compiled only when the CUDA toolkit was found. Links cuBLAS and the CUDA runtime, never the
// driver stub: without a driver, MakeCublas() reports Unavailable and the CPU engine is used.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "ddpio/device/probe.h"
#include "ddpio/trainer/blas.h"

namespace ddpio::trainer {
namespace {

// A device buffer that only grows.
struct DeviceBuffer {
  float* ptr = nullptr;
  size_t floats = 0;
  ~DeviceBuffer() { cudaFree(ptr); }
  cudaError_t Reserve(size_t n) {
    if (n <= floats) return cudaSuccess;
    cudaFree(ptr);
    ptr = nullptr;
    floats = 0;
    const cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(float));
    if (err == cudaSuccess) floats = n;
    return err;
  }
};

class Cublas : public MatMul {
 public:
  Cublas(cublasHandle_t handle, cudaStream_t stream) : handle_(handle), stream_(stream) {}
  ~Cublas() override {
    cublasDestroy(handle_);
    cudaStreamDestroy(stream_);
  }

  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    if (!status_.ok() || m == 0 || n == 0) return;
    const size_t a_n = static_cast<size_t>(trans_a ? k : m) * lda,
                 b_n = static_cast<size_t>(trans_b ? n : k) * ldb;
    const size_t c_n = static_cast<size_t>(m) * ldc;
    if (!Cuda(a_.Reserve(a_n), "cudaMalloc") || !Cuda(b_.Reserve(b_n), "cudaMalloc") ||
        !Cuda(c_.Reserve(c_n), "cudaMalloc") ||
        !Cuda(cudaMemcpyAsync(a_.ptr, a, a_n * sizeof(float), cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync") ||
        !Cuda(cudaMemcpyAsync(b_.ptr, b, b_n * sizeof(float), cudaMemcpyHostToDevice, stream_),
              "cudaMemcpyAsync") ||
        (beta != 0.0f &&
         !Cuda(cudaMemcpyAsync(c_.ptr, c, c_n * sizeof(float), cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync"))) {
      return;
    }
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    const cublasStatus_t st = cublasSgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                          b_.ptr, ldb, a_.ptr, lda, &beta, c_.ptr, ldc);
    if (st != CUBLAS_STATUS_SUCCESS) {
      status_ = absl::InternalError(absl::StrCat("cublasSgemm: ", cublasGetStatusString(st)));
      return;
    }
    if (!Cuda(cudaMemcpyAsync(c, c_.ptr, c_n * sizeof(float), cudaMemcpyDeviceToHost, stream_),
              "cudaMemcpyAsync")) {
      return;
    }
    Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  absl::Status status() const override { return status_; }
  std::string Describe() const override {
    int version = 0;
    cublasGetVersion(handle_, &version);
    return absl::StrCat("cuda: cuBLAS ", version, " on device 0 (operands staged per product)");
  }

 private:
  bool Cuda(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return true;
    status_ = absl::InternalError(
        absl::StrCat(what, ": ", cudaGetErrorName(err), " ", cudaGetErrorString(err)));
    return false;
  }

  cublasHandle_t handle_;
  cudaStream_t stream_;
  DeviceBuffer a_, b_, c_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MatMul>> MakeCublas() {
  const device::DeviceInfo& info = device::Probe();
  if (info.devices == 0)
    return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", info.why));
  if (cudaError_t err = cudaSetDevice(0); err != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("cudaSetDevice(0): ", cudaGetErrorName(err)));
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      err != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("cudaStreamCreate: ", cudaGetErrorName(err)));
  }
  cublasHandle_t handle = nullptr;
  if (cublasStatus_t st = cublasCreate(&handle); st != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    return absl::UnavailableError(absl::StrCat("cublasCreate: ", cublasGetStatusString(st)));
  }
  cublasSetStream(handle, stream);
  return std::unique_ptr<MatMul>(new Cublas(handle, stream));
}

}  // namespace ddpio::trainer
