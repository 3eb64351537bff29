// The arithmetic of the device trainer's element-wise steps, one element (or one row) at a time,
// written once for both compilers: nvcc compiles it into the kernels (device_kernels.cu) and the
// host compiler into the test stand-in (tests/gpu_standin/kernels_standin.cc), so the stand-in
// runs the very code a GPU runs, only launched differently. Each function mirrors the CPU Mlp's
// and Sgd's expressions operation for operation.
#ifndef DDPIO_TRAINER_DEVICE_MATH_H_
#define DDPIO_TRAINER_DEVICE_MATH_H_

#include <math.h>

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define DDPIO_HOST_DEVICE __host__ __device__
#else
#define DDPIO_HOST_DEVICE
#endif

namespace ddpio::trainer::device_math {

DDPIO_HOST_DEVICE inline float Normalize(uint8_t v, float mean, float stddev) {
  return (static_cast<int>(v) / 255.0f - mean) / stddev;
}

DDPIO_HOST_DEVICE inline float Relu(float v) { return v < 0.0f ? 0.0f : v; }  // std::max(v, 0.0f)

// One row of softmax cross-entropy (see ddpio_softmax_xent); returns the row's loss.
DDPIO_HOST_DEVICE inline double SoftmaxXentRow(const float* z, int label, int classes, double scale,
                                               float* d) {
  if (label < 0 || label >= classes) {
    for (int c = 0; c < classes; ++c) d[c] = 0.0f;
    return 0.0;
  }
  float zmax = z[0];
  for (int c = 1; c < classes; ++c) {
    if (zmax < z[c]) zmax = z[c];  // std::max_element's choice
  }
  // A class below e^-110 of the largest adds nothing to the sum (>= 1: under its last bit) and,
  // with scale <= 1, its delta rounds to 0 in float either way: skipped, with the same bits, and
  // without libm's slow path for far-off arguments (a next-token model's logits spread that far:
  // twice the step time, measured).
  const double cutoff = scale <= 1.0 ? -110.0 : -1e300;
  const auto e = [&](int c) {
    const double t = static_cast<double>(z[c] - zmax);
    return t < cutoff ? 0.0 : exp(t);
  };
  double sum = 0;
  for (int c = 0; c < classes; ++c) sum += e(c);
  const double loss = (log(sum) + zmax - z[label]) * scale;
  for (int c = 0; c < classes; ++c) {
    d[c] = static_cast<float>((e(c) / sum - (c == label ? 1 : 0)) * scale);
  }
  return loss;
}

// Column c of the bias gradient: out + d[0][c] + d[1][c] + ... in row order.
DDPIO_HOST_DEVICE inline float ColumnSum(const float* d, int rows, int cols, int c, float out) {
  for (int r = 0; r < rows; ++r) out += d[static_cast<size_t>(r) * cols + c];
  return out;
}

DDPIO_HOST_DEVICE inline void SgdElement(float* p, float g, float* buf, float m, float wd, float lr,
                                         bool started) {
  float d = g + wd * *p;
  if (m != 0.0f) {
    *buf = started ? m * *buf + d : d;
    d = *buf;
  }
  *p -= lr * d;
}

DDPIO_HOST_DEVICE inline int32_t ArgmaxRow(const float* row, int cols) {
  int best = 0;
  for (int c = 1; c < cols; ++c) {
    if (row[best] < row[c]) best = c;
  }
  return best;
}

}  // namespace ddpio::trainer::device_math

#endif  // DDPIO_TRAINER_DEVICE_MATH_H_
