// Built without the CUDA toolkit: there is no cuBLAS engine.
#include "ddpio/trainer/blas.h"

namespace ddpio::trainer {

absl::StatusOr<std::unique_ptr<MatMul>> MakeCublas() {
  return absl::UnavailableError(
      "ddpio was built without CUDA (DDPIO_WITH_CUDA=OFF or no toolkit found)");
}

}  // namespace ddpio::trainer
