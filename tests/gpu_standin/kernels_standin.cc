// Test-only stand-in for ddpio's device kernels (ddpio/trainer/device_kernels.h): each "launch"
// queues the kernel's loop on the stream's thread, in order with the copies, products and
// collectives queued there (standin.h), and runs the same per-element code the kernels
// run (device_math.h). Like the real wrappers, each returns cudaGetLastError() after its launch,
// so a "not ready" a query left on the calling thread (cuda_standin.cc) fails the launch here as it
// would on a GPU. Never installed, never linked into ddpio.
#include <cmath>

#include "ddpio/trainer/device_kernels.h"
#include "ddpio/trainer/device_math.h"
#include "tests/gpu_standin/standin.h"

namespace dm = ddpio::trainer::device_math;
using ddpio::standin::Enqueue;

namespace {

// Kernels get device pointers only: host memory (or a range past its allocation) would fault.
bool Device(std::initializer_list<std::pair<const void*, size_t>> buffers) {
  for (const auto& [p, bytes] : buffers) {
    if (bytes > 0 && !ddpio::standin::IsDeviceMemory(p, bytes)) return false;
  }
  return true;
}

}  // namespace

extern "C" {

cudaError_t ddpio_normalize_hwc(const uint8_t* in, float* out, size_t values, float mean0,
                                float mean1, float mean2, float std0, float std1, float std2,
                                cudaStream_t stream) {
  if (!Device({{in, values}, {out, values * 4}})) return cudaErrorInvalidValue;
  Enqueue(stream, [=] {
    const float mean[3] = {mean0, mean1, mean2}, stddev[3] = {std0, std1, std2};
    for (size_t i = 0; i < values; ++i) out[i] = dm::Normalize(in[i], mean[i % 3], stddev[i % 3]);
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

cudaError_t ddpio_fill_rows(float* out, const float* row, int rows, int cols, cudaStream_t stream) {
  if (!Device({{out, size_t(rows) * cols * 4}, {row, size_t(cols) * 4}}))
    return cudaErrorInvalidValue;
  Enqueue(stream, [=] {
    for (size_t i = 0; i < static_cast<size_t>(rows) * cols; ++i) out[i] = row[i % cols];
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

cudaError_t ddpio_relu(float* x, size_t n, cudaStream_t stream) {
  if (!Device({{x, n * 4}})) return cudaErrorInvalidValue;
  Enqueue(stream, [=] {
    for (size_t i = 0; i < n; ++i) x[i] = dm::Relu(x[i]);
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

cudaError_t ddpio_softmax_xent(const float* logits, const int32_t* labels, int batch, int classes,
                               double scale, float* delta, double* loss, cudaStream_t stream) {
  const size_t rows = static_cast<size_t>(batch), values = rows * classes;
  if (!Device({{logits, values * 4}, {labels, rows * 4}, {delta, values * 4}, {loss, rows * 8}})) {
    return cudaErrorInvalidValue;
  }
  Enqueue(stream, [=] {
    for (size_t i = 0; i < static_cast<size_t>(batch); ++i) {
      loss[i] =
          dm::SoftmaxXentRow(logits + i * classes, labels[i], classes, scale, delta + i * classes);
    }
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

cudaError_t ddpio_add_column_sums(const float* d, int rows, int cols, float* out,
                                  cudaStream_t stream) {
  if (!Device({{d, size_t(rows) * cols * 4}, {out, size_t(cols) * 4}}))
    return cudaErrorInvalidValue;
  Enqueue(stream, [=] {
    for (int c = 0; c < cols; ++c) out[c] = dm::ColumnSum(d, rows, cols, c, out[c]);
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

cudaError_t ddpio_relu_mask(float* delta, const float* act, size_t n, cudaStream_t stream) {
  if (!Device({{delta, n * 4}, {act, n * 4}})) return cudaErrorInvalidValue;
  Enqueue(stream, [=] {
    for (size_t i = 0; i < n; ++i) {
      if (act[i] <= 0.0f) delta[i] = 0.0f;
    }
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

cudaError_t ddpio_sgd(float* params, const float* grads, float* buf, size_t n, float momentum,
                      float weight_decay, float lr, int started, cudaStream_t stream) {
  if (!Device({{params, n * 4}, {grads, n * 4}, {buf, n * 4}})) return cudaErrorInvalidValue;
  Enqueue(stream, [=] {
    for (size_t i = 0; i < n; ++i)
      dm::SgdElement(params + i, grads[i], buf + i, momentum, weight_decay, lr, started);
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

cudaError_t ddpio_argmax_rows(const float* z, int rows, int cols, int32_t* out,
                              cudaStream_t stream) {
  if (!Device({{z, size_t(rows) * cols * 4}, {out, size_t(rows) * 4}}))
    return cudaErrorInvalidValue;
  Enqueue(stream, [=] {
    for (size_t i = 0; i < static_cast<size_t>(rows); ++i)
      out[i] = dm::ArgmaxRow(z + i * cols, cols);
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

cudaError_t ddpio_count_nonfinite(const float* x, size_t n, uint32_t* count, cudaStream_t stream) {
  if (!Device({{x, n * 4}, {count, 4}})) return cudaErrorInvalidValue;
  Enqueue(stream, [=] {
    for (size_t i = 0; i < n; ++i) *count += std::isfinite(x[i]) ? 0 : 1;
  });
  return cudaGetLastError();  // as device_kernels.cu: the thread's last error after the launch
}

}  // extern "C"
