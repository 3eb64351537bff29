#include "ddpio/device/cuda_runtime.h"

#include "absl/strings/str_cat.h"
#include "ddpio/device/probe.h"

namespace ddpio::device {

absl::StatusOr<std::unique_ptr<CudaRuntime>> OpenDeviceForRank(int local_rank, int device) {
  const DeviceInfo& info = Probe();
  if (info.devices < 1)
    return absl::FailedPreconditionError(absl::StrCat("no usable CUDA device (", info.why, ")"));
  const int chosen = device >= 0 ? device : DeviceForRank(local_rank, info.devices);
  if (chosen >= info.devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", chosen, " asked for, ", info.devices, " present"));
  }
  std::string why;
  std::unique_ptr<CudaRuntime> runtime = MakeCudaRuntime(&why, chosen);
  if (runtime == nullptr)
    return absl::FailedPreconditionError(absl::StrCat("CUDA device ", chosen, ": ", why));
  return runtime;
}

}  // namespace ddpio::device
