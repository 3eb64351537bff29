// The device trainer's element-wise kernels (device_kernels.h) around the arithmetic of
// device_math.h. Compiled by nvcc with -fmad=false (no fused multiply-add: the same rounding as the
// CPU model). One thread per element (per row for the softmax, per column for the bias gradient):
// these steps are a small part of a step next to the products and the all-reduce.
#include "ddpio/trainer/device_kernels.h"
#include "ddpio/trainer/device_math.h"

namespace {

using namespace ddpio::trainer::device_math;  // NOLINT: the element functions

constexpr int kThreads = 256;

unsigned Blocks(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__device__ size_t Index() { return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; }

__global__ void NormalizeKernel(const uint8_t* in, float* out, size_t values, float3 mean,
                                float3 stddev) {
  const size_t i = Index();
  if (i >= values) return;
  const int c = static_cast<int>(i % 3);
  const float m = c == 0 ? mean.x : c == 1 ? mean.y : mean.z;
  out[i] = Normalize(in[i], m, c == 0 ? stddev.x : c == 1 ? stddev.y : stddev.z);
}

__global__ void FillRowsKernel(float* out, const float* row, int rows, int cols) {
  const size_t i = Index();
  if (i < static_cast<size_t>(rows) * cols) out[i] = row[i % cols];
}

__global__ void ReluKernel(float* x, size_t n) {
  const size_t i = Index();
  if (i < n) x[i] = Relu(x[i]);
}

__global__ void SoftmaxXentKernel(const float* logits, const int32_t* labels, int batch,
                                  int classes, double scale, float* delta, double* loss) {
  const size_t i = Index();
  if (i < static_cast<size_t>(batch)) {
    loss[i] = SoftmaxXentRow(logits + i * classes, labels[i], classes, scale, delta + i * classes);
  }
}

__global__ void AddColumnSumsKernel(const float* d, int rows, int cols, float* out) {
  const size_t c = Index();
  if (c < static_cast<size_t>(cols)) out[c] = ColumnSum(d, rows, cols, static_cast<int>(c), out[c]);
}

__global__ void ReluMaskKernel(float* delta, const float* act, size_t n) {
  const size_t i = Index();
  if (i < n && act[i] <= 0.0f) delta[i] = 0.0f;
}

__global__ void SgdKernel(float* p, const float* g, float* buf, size_t n, float m, float wd,
                          float lr, int started) {
  const size_t i = Index();
  if (i < n) SgdElement(p + i, g[i], buf + i, m, wd, lr, started != 0);
}

__global__ void ArgmaxRowsKernel(const float* z, int rows, int cols, int32_t* out) {
  const size_t i = Index();
  if (i < static_cast<size_t>(rows)) out[i] = ArgmaxRow(z + i * cols, cols);
}

__global__ void CountNonfiniteKernel(const float* x, size_t n, uint32_t* count) {
  const size_t i = Index();
  if (i < n && !isfinite(x[i])) atomicAdd(count, 1u);
}

}  // namespace

extern "C" {

cudaError_t ddpio_normalize_hwc(const uint8_t* in, float* out, size_t values, float mean0,
                                float mean1, float mean2, float std0, float std1, float std2,
                                cudaStream_t stream) {
  if (values == 0) return cudaSuccess;
  NormalizeKernel<<<Blocks(values), kThreads, 0, stream>>>(
      in, out, values, make_float3(mean0, mean1, mean2), make_float3(std0, std1, std2));
  return cudaGetLastError();
}

cudaError_t ddpio_fill_rows(float* out, const float* row, int rows, int cols, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(rows) * cols;
  if (n == 0) return cudaSuccess;
  FillRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(out, row, rows, cols);
  return cudaGetLastError();
}

cudaError_t ddpio_relu(float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ReluKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n);
  return cudaGetLastError();
}

cudaError_t ddpio_softmax_xent(const float* logits, const int32_t* labels, int batch, int classes,
                               double scale, float* delta, double* loss, cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  SoftmaxXentKernel<<<Blocks(batch), kThreads, 0, stream>>>(logits, labels, batch, classes, scale,
                                                            delta, loss);
  return cudaGetLastError();
}

cudaError_t ddpio_add_column_sums(const float* d, int rows, int cols, float* out,
                                  cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  AddColumnSumsKernel<<<Blocks(cols), kThreads, 0, stream>>>(d, rows, cols, out);
  return cudaGetLastError();
}

cudaError_t ddpio_relu_mask(float* delta, const float* act, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ReluMaskKernel<<<Blocks(n), kThreads, 0, stream>>>(delta, act, n);
  return cudaGetLastError();
}

cudaError_t ddpio_sgd(float* params, const float* grads, float* buf, size_t n, float momentum,
                      float weight_decay, float lr, int started, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SgdKernel<<<Blocks(n), kThreads, 0, stream>>>(params, grads, buf, n, momentum, weight_decay, lr,
                                                started);
  return cudaGetLastError();
}

cudaError_t ddpio_argmax_rows(const float* z, int rows, int cols, int32_t* out,
                              cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  ArgmaxRowsKernel<<<Blocks(rows), kThreads, 0, stream>>>(z, rows, cols, out);
  return cudaGetLastError();
}

cudaError_t ddpio_count_nonfinite(const float* x, size_t n, uint32_t* count, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  CountNonfiniteKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, count);
  return cudaGetLastError();
}

}  // extern "C"
