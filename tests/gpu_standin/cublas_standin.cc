// Test-only stand-in for the cuBLAS functions ddpio's device trainer calls, beside the CUDA/NCCL
// stand-in (cuda_standin.cc): a handle remembers its stream, and cublasSgemm runs OpenBLAS's
// column-major SGEMM on that stream's thread ("device" memory is host memory there). It includes
// the real cublas_v2.h, so a signature that drifts from cuBLAS fails to compile. Never
// installed, never linked into ddpio.
//
// The CPU trainer's row-major cblas_sgemm is OpenBLAS's column-major kernel on swapped operands,
// which is exactly the call the device path makes through cuBLAS: through this stand-in the two
// paths multiply bit for bit alike (one OpenBLAS thread, as the CPU engine uses by default).
#include <cblas.h>
#include <cublas_v2.h>

#include "tests/gpu_standin/standin.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

CBLAS_TRANSPOSE Op(cublasOperation_t op) { return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; }

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  openblas_set_num_threads(1);
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *version = 0;  // the stand-in
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "stand-in cuBLAS error";
}

// alpha and beta are host pointers (CUBLAS_POINTER_MODE_HOST, the default): read at the call,
// as cuBLAS does.
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  using ddpio::standin::IsDeviceMemory;
  // Column-major: op(A) is m x k, A itself (transa ? k x m : m x k) with leading dimension lda.
  const size_t a_cols = transa == CUBLAS_OP_N ? k : m, b_cols = transb == CUBLAS_OP_N ? n : k;
  if ((m > 0 && k > 0 && !IsDeviceMemory(A, (static_cast<size_t>(a_cols) - 1) * lda * 4 + 4)) ||
      (k > 0 && n > 0 && !IsDeviceMemory(B, (static_cast<size_t>(b_cols) - 1) * ldb * 4 + 4)) ||
      (m > 0 && n > 0 && !IsDeviceMemory(C, (static_cast<size_t>(n) - 1) * ldc * 4 + 4))) {
    return CUBLAS_STATUS_INVALID_VALUE;  // host memory, or operands running past their allocation
  }
  const float a = *alpha, b = *beta;
  ddpio::standin::Enqueue(handle->stream, [=] {
    cblas_sgemm(CblasColMajor, Op(transa), Op(transb), m, n, k, a, A, lda, B, ldb, b, C, ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
