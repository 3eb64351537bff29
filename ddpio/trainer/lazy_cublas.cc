// The cuBLAS functions the trainer calls, opened on first use (device/lazy_library.h). Linked
// into ddpio in place of libcublas; the cuBLAS stand-in (tests/gpu_standin/cublas_standin.cc)
// overrides them in tests. When cuBLAS does not load, every call returns
// CUBLAS_STATUS_NOT_INITIALIZED and cublasGetStatusString says which library and why.
#include <cublas_v2.h>

#include "ddpio/device/gpu_libraries.h"
#include "ddpio/device/internal/lazy_forward.h"

namespace {

using ddpio::device::CublasLibrary;
constexpr cublasStatus_t kMissing = CUBLAS_STATUS_NOT_INITIALIZED;

}  // namespace

extern "C" {

DDPIO_LAZY_WEAK cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  DDPIO_LAZY_FORWARD(CublasLibrary(), cublasCreate_v2, kMissing, handle);
}
DDPIO_LAZY_WEAK cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  DDPIO_LAZY_FORWARD(CublasLibrary(), cublasDestroy_v2, kMissing, handle);
}
DDPIO_LAZY_WEAK cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  DDPIO_LAZY_FORWARD(CublasLibrary(), cublasGetVersion_v2, kMissing, handle, version);
}
DDPIO_LAZY_WEAK cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(CublasLibrary(), cublasSetStream_v2, kMissing, handle, stream);
}
DDPIO_LAZY_WEAK cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                                              cublasOperation_t transb, int m, int n, int k,
                                              const float* alpha, const float* a, int lda,
                                              const float* b, int ldb, const float* beta, float* c,
                                              int ldc) {
  DDPIO_LAZY_FORWARD(CublasLibrary(), cublasSgemm_v2, kMissing, handle, transa, transb, m, n, k,
                     alpha, a, lda, b, ldb, beta, c, ldc);
}
DDPIO_LAZY_WEAK const char* cublasGetStatusString(cublasStatus_t status) {
  DDPIO_LAZY_FORWARD(CublasLibrary(), cublasGetStatusString, CublasLibrary().error(), status);
}

}  // extern "C"
