#include "ddpio/trainer/blas.h"

#include <cblas.h>

#include "absl/strings/str_cat.h"

namespace ddpio::trainer {
namespace {

class OpenBlas : public MatMul {
 public:
  explicit OpenBlas(int threads) : threads_(threads) { openblas_set_num_threads(threads); }
  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  std::string Describe() const override {
    return absl::StrCat("cpu: ", openblas_get_config(), ", ", threads_, " thread(s)");
  }

 private:
  int threads_;
};

}  // namespace

std::unique_ptr<MatMul> MakeOpenBlas(int threads) {
  return std::make_unique<OpenBlas>(threads < 1 ? 1 : threads);
}

MatMul& DefaultMatMul() {
  static MatMul* engine = MakeOpenBlas(1).release();  // never destroyed: usable at exit
  return *engine;
}

absl::StatusOr<std::unique_ptr<MatMul>> SelectMatMul(std::string_view which, int threads,
                                                     std::string* why) {
  if (which != "cpu" && which != "cuda" && which != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown matmul engine '", std::string(which), "' (cpu, cuda or auto)"));
  }
  if (which != "cpu") {
    absl::StatusOr<std::unique_ptr<MatMul>> gpu = MakeCublas();
    if (gpu.ok()) {
      *why = (*gpu)->Describe();
      return gpu;
    }
    if (which == "cuda") return gpu.status();
    std::unique_ptr<MatMul> cpu = MakeOpenBlas(threads);
    *why = absl::StrCat(cpu->Describe(), " (no cuBLAS: ", gpu.status().message(), ")");
    return cpu;
  }
  std::unique_ptr<MatMul> cpu = MakeOpenBlas(threads);
  *why = cpu->Describe();
  return cpu;
}

}  // namespace ddpio::trainer
