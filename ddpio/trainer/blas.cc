#include "ddpio/trainer/blas.h"

#include <cblas.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/device/lazy_library.h"

#ifndef DDPIO_OPENBLAS_LIBDIR
#define DDPIO_OPENBLAS_LIBDIR ""
#endif

namespace ddpio::trainer {
namespace {

// OpenBLAS is opened when the first CPU engine is made, not when the program starts: loading it
// starts its thread pool, which no process but a trainer's needs.
struct OpenBlasFunctions {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&openblas_get_config) get_config = nullptr;
  absl::Status status;
  device::LazyLibrary* library =
      nullptr;  // kept reachable: never destroyed, engines use it until exit
};

const OpenBlasFunctions& LoadOpenBlas() {
  static const OpenBlasFunctions* fns = [] {
    constexpr char kSoname[] = "libopenblas.so.0";
    std::vector<std::string> candidates = {kSoname};
    if (!std::string(DDPIO_OPENBLAS_LIBDIR).empty()) {
      candidates.push_back(absl::StrCat(DDPIO_OPENBLAS_LIBDIR, "/", kSoname));
    }
    // Never destroyed: engines are used until exit.
    auto* lib = new device::LazyLibrary("OpenBLAS", std::move(candidates));
    auto* f = new OpenBlasFunctions();
    f->library = lib;
    f->sgemm = reinterpret_cast<decltype(&cblas_sgemm)>(lib->Symbol("cblas_sgemm"));
    f->set_num_threads = reinterpret_cast<decltype(&openblas_set_num_threads)>(
        lib->Symbol("openblas_set_num_threads"));
    f->get_config =
        reinterpret_cast<decltype(&openblas_get_config)>(lib->Symbol("openblas_get_config"));
    if (f->sgemm == nullptr || f->set_num_threads == nullptr || f->get_config == nullptr) {
      f->status = absl::FailedPreconditionError(lib->error());
    }
    return f;
  }();
  return *fns;
}

// Debian's OpenBLAS (DYNAMIC_ARCH) may return with the upper halves of the vector registers in
// use; the SSE code after it (ours, libm's) then pays a transition penalty on every instruction.
// Measured: the softmax after the products ran 6x slower (exp at ~120 ns instead of 9 ns).
// vzeroupper clears that state where the CPU has AVX.
void ClearUpperVectorState() {
#if defined(__x86_64__)
  static const bool avx = __builtin_cpu_supports("avx");
  if (avx) asm volatile("vzeroupper" ::: "memory");
#endif
}

class OpenBlas : public MatMul {
 public:
  explicit OpenBlas(int threads) : threads_(threads), fns_(LoadOpenBlas()) {
    if (fns_.status.ok()) fns_.set_num_threads(threads);
  }
  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    if (!fns_.status.ok()) return;  // status() says why; callers check it once per step
    fns_.sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
               trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    ClearUpperVectorState();
  }
  absl::Status status() const override { return fns_.status; }
  std::string Describe() const override {
    if (!fns_.status.ok()) return absl::StrCat("cpu: ", fns_.status.message());
    return absl::StrCat("cpu: ", fns_.get_config(), ", ", threads_, " thread(s)");
  }

 private:
  int threads_;
  const OpenBlasFunctions& fns_;
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
