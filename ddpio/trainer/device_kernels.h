// The element-wise steps of the device trainer's model, as C functions that enqueue a kernel on a
// stream and return the launch error. Defined in device_kernels.cu (nvcc, CUDA builds) and, for
// tests on machines without a GPU, by a host stand-in (tests/gpu_standin/kernels_standin.cc)
// that runs the same arithmetic on the stream's thread — the pattern of the NCCL stand-in: the
// symbols are bound at link time. In ddpio the kernels are a module of their own
// (libddpio_kernels.so), opened when first called (lazy_kernels.cc, device/lazy_library.h).
//
// Every function reproduces the CPU Mlp's arithmetic operation for operation (device_kernels.cu
// is compiled with -fmad=false so no multiply-add is fused), so the device model and the CPU
// model agree bit for bit wherever the library functions agree (exp and log may differ in the
// last place between the GPU and glibc). Pointers are device pointers unless said otherwise.
#ifndef DDPIO_TRAINER_DEVICE_KERNELS_H_
#define DDPIO_TRAINER_DEVICE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

extern "C" {

// out[i] = (in[i] / 255 - mean[i % 3]) / stddev[i % 3] for i < values: uint8 H,W,C pixels to the
// model's float input (the trainer's normalisation).
cudaError_t ddpio_normalize_hwc(const uint8_t* in, float* out, size_t values, float mean0,
                                float mean1, float mean2, float std0, float std1, float std2,
                                cudaStream_t stream);
// Every one of `rows` rows of `out` (rows x cols) = `row` (cols): the bias before x W^T is added.
cudaError_t ddpio_fill_rows(float* out, const float* row, int rows, int cols, cudaStream_t stream);
// x = max(x, 0).
cudaError_t ddpio_relu(float* x, size_t n, cudaStream_t stream);
// Per row i of logits (batch x classes) with labels[i] in [0, classes): delta row =
// (softmax - one-hot) * scale and loss[i] = (log sum exp - z[label]) * scale, in double as the CPU
// computes them; any other label: a zero delta row and loss 0 (a sample left out).
cudaError_t ddpio_softmax_xent(const float* logits, const int32_t* labels, int batch, int classes,
                               double scale, float* delta, double* loss, cudaStream_t stream);
// out[c] += d[0][c] + d[1][c] + ... in row order (the bias gradient).
cudaError_t ddpio_add_column_sums(const float* d, int rows, int cols, float* out,
                                  cudaStream_t stream);
// delta[i] = 0 where act[i] <= 0 (ReLU's derivative).
cudaError_t ddpio_relu_mask(float* delta, const float* act, size_t n, cudaStream_t stream);
// torch.optim.SGD (dampening 0): d = g + wd * p; buf = started ? momentum * buf + d : d (when
// momentum != 0); p -= lr * d.
cudaError_t ddpio_sgd(float* params, const float* grads, float* buf, size_t n, float momentum,
                      float weight_decay, float lr, int started, cudaStream_t stream);
// out[i] = the first column holding row i's maximum.
cudaError_t ddpio_argmax_rows(const float* z, int rows, int cols, int32_t* out,
                              cudaStream_t stream);
// *count += the number of elements of x that are NaN or infinite.
cudaError_t ddpio_count_nonfinite(const float* x, size_t n, uint32_t* count, cudaStream_t stream);

}  // extern "C"

#endif  // DDPIO_TRAINER_DEVICE_KERNELS_H_
