// Dense matrix products for the trainer, row-major, behind one interface with two engines:
//  - OpenBLAS on the CPU (chosen over Eigen by measurement on the trainer's shapes:
//    docs/PERFORMANCE.md, scripts/bench-gemm.sh);
//  - cuBLAS on CUDA device 0, compiled when the CUDA toolkit is found. Operands are staged
//    through device buffers per call (the model lives in host memory, where the Gloo
//    all-reduce and the checkpoints want it); no GPU here, so it is compiled and linked in CI
//    but runs only on a machine with a device.
// Engine errors (a failed cudaMalloc, a cuBLAS error) are sticky: the first one is kept and
// status() returns it, so callers check once per step instead of per product.
#ifndef DDPIO_TRAINER_BLAS_H_
#define DDPIO_TRAINER_BLAS_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ddpio::trainer {

class MatMul {
 public:
  virtual ~MatMul() = default;
  // C[m x n] = alpha * op(A) * op(B) + beta * C, row-major; op(X) = X or X^T.
  virtual void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) = 0;
  virtual absl::Status status() const { return absl::OkStatus(); }
  // e.g. "cpu: OpenBLAS 0.3.21 ..., 1 thread(s)" or "cuda: cuBLAS 13.0 on device 0".
  virtual std::string Describe() const = 0;
};

// OpenBLAS; `threads` per call (ranks sharing a machine want 1 each). One per process is enough.
std::unique_ptr<MatMul> MakeOpenBlas(int threads);
// The process-wide OpenBLAS engine with 1 thread (what an Mlp uses when given none).
MatMul& DefaultMatMul();
// cuBLAS on device 0. Unavailable when built without CUDA or when no device is usable.
absl::StatusOr<std::unique_ptr<MatMul>> MakeCublas();
// `which`: "cpu", "cuda" (an error without a usable device) or "auto" (cuda when a device is
// usable, else cpu). `why` gets one line saying which engine was taken and why.
absl::StatusOr<std::unique_ptr<MatMul>> SelectMatMul(std::string_view which, int threads,
                                                     std::string* why);

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_BLAS_H_
