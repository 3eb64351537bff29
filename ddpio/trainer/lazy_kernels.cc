// ddpio's CUDA kernels (device_kernels.h), opened on first use from libddpio_kernels.so
// (device/gpu_libraries.h), which nvcc builds beside the program: so that the CUDA runtime is
// loaded only when the device model first runs. The kernel stand-in
// (tests/gpu_standin/kernels_standin.cc) overrides these in tests. When the kernels do not load,
// every call returns cudaErrorSharedObjectInitFailed (and the reason is logged once).
#include "ddpio/device/gpu_libraries.h"
#include "ddpio/device/internal/lazy_forward.h"
#include "ddpio/trainer/device_kernels.h"

namespace {

using ddpio::device::KernelsLibrary;
constexpr cudaError_t kMissing = cudaErrorSharedObjectInitFailed;

}  // namespace

extern "C" {

DDPIO_LAZY_WEAK cudaError_t ddpio_normalize_hwc(const uint8_t* in, float* out, size_t values,
                                                float mean0, float mean1, float mean2, float std0,
                                                float std1, float std2, cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_normalize_hwc, kMissing, in, out, values, mean0, mean1,
                     mean2, std0, std1, std2, stream);
}
DDPIO_LAZY_WEAK cudaError_t ddpio_fill_rows(float* out, const float* row, int rows, int cols,
                                            cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_fill_rows, kMissing, out, row, rows, cols, stream);
}
DDPIO_LAZY_WEAK cudaError_t ddpio_relu(float* x, size_t n, cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_relu, kMissing, x, n, stream);
}
DDPIO_LAZY_WEAK cudaError_t ddpio_softmax_xent(const float* logits, const int32_t* labels,
                                               int batch, int classes, double scale, float* delta,
                                               double* loss, cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_softmax_xent, kMissing, logits, labels, batch, classes,
                     scale, delta, loss, stream);
}
DDPIO_LAZY_WEAK cudaError_t ddpio_add_column_sums(const float* d, int rows, int cols, float* out,
                                                  cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_add_column_sums, kMissing, d, rows, cols, out, stream);
}
DDPIO_LAZY_WEAK cudaError_t ddpio_relu_mask(float* delta, const float* act, size_t n,
                                            cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_relu_mask, kMissing, delta, act, n, stream);
}
DDPIO_LAZY_WEAK cudaError_t ddpio_sgd(float* params, const float* grads, float* buf, size_t n,
                                      float momentum, float weight_decay, float lr, int started,
                                      cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_sgd, kMissing, params, grads, buf, n, momentum,
                     weight_decay, lr, started, stream);
}
DDPIO_LAZY_WEAK cudaError_t ddpio_argmax_rows(const float* z, int rows, int cols, int32_t* out,
                                              cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_argmax_rows, kMissing, z, rows, cols, out, stream);
}
DDPIO_LAZY_WEAK cudaError_t ddpio_count_nonfinite(const float* x, size_t n, uint32_t* count,
                                                  cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(KernelsLibrary(), ddpio_count_nonfinite, kMissing, x, n, count, stream);
}

}  // extern "C"
