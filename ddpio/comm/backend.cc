#include "ddpio/comm/backend.h"

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/device/probe.h"
#if DDPIO_COMM_NCCL
#include "ddpio/comm/nccl/nccl_api.h"
#include "ddpio/comm/nccl/nccl_communicator.h"
#include "ddpio/device/cuda_runtime.h"
#endif

namespace ddpio::comm {

namespace {
constexpr EnumName<BackendKind> kBackends[] = {
    {BackendKind::kAuto, "auto"}, {BackendKind::kGloo, "gloo"}, {BackendKind::kNccl, "nccl"}};
}  // namespace

absl::StatusOr<BackendKind> ParseBackend(std::string_view name) {
  return ParseName(kBackends, name, "backend");
}
std::string BackendName(BackendKind kind) { return NameOf(kBackends, kind); }

absl::StatusOr<BackendChoice> ChooseBackend(BackendKind requested,
                                            const device::DeviceInfo& probe) {
  switch (requested) {
    case BackendKind::kGloo:
      return BackendChoice{BackendKind::kGloo, "gloo (asked for)"};
    case BackendKind::kNccl:
      if (!probe.nccl_compiled) {
        return WithSetting(
            absl::FailedPreconditionError(
                "backend nccl: this ddpio was built without NCCL (DDPIO_WITH_NCCL=OFF or NCCL not "
                "found at build time); use the gloo backend"),
            "backend");
      }
      if (probe.devices < 1) {
        return WithSetting(
            absl::FailedPreconditionError(
                absl::StrCat("backend nccl needs a usable CUDA device and this machine has none (",
                             probe.why, "); use the gloo or auto backend")),
            "backend");
      }
      return BackendChoice{BackendKind::kNccl,
                           absl::StrCat("nccl (asked for; ", probe.devices, " CUDA device(s))")};
    case BackendKind::kAuto:
      if (probe.nccl_compiled && probe.devices > 0) {
        return BackendChoice{BackendKind::kNccl,
                             absl::StrCat("auto: nccl (", probe.devices, " CUDA device(s))")};
      }
      if (!probe.nccl_compiled) {
        return BackendChoice{BackendKind::kGloo,
                             absl::StrCat("auto: gloo (ddpio was built without NCCL",
                                          probe.why.empty() ? "" : "; ", probe.why, ")")};
      }
      return BackendChoice{BackendKind::kGloo,
                           absl::StrCat("auto: gloo (no usable CUDA device: ", probe.why, ")")};
  }
  return absl::InvalidArgumentError("unknown backend");
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const BackendChoice& choice,
                                                                 std::shared_ptr<Store> store,
                                                                 int rank, int size,
                                                                 const CommOptions& options) {
  if (choice.kind == BackendKind::kNccl) {
#if DDPIO_COMM_NCCL
    absl::StatusOr<std::unique_ptr<device::CudaRuntime>> cuda =
        device::OpenDeviceForRank(options.local_rank, options.device);
    if (!cuda.ok()) {
      return absl::Status(cuda.status().code(), absl::StrCat("the NCCL backend on rank ", rank,
                                                             ": ", cuda.status().message()));
    }
    NcclOptions o;
    o.timeout = options.gloo.timeout;
    DDPIO_ASSIGN_OR_RETURN(auto comm, NcclCommunicator::Create(SystemNcclApi(), *std::move(cuda),
                                                               std::move(store), rank, size, o));
    return std::unique_ptr<Communicator>(std::move(comm));
#else
    return absl::FailedPreconditionError("backend nccl: this ddpio was built without NCCL");
#endif
  }
  DDPIO_ASSIGN_OR_RETURN(auto comm,
                         GlooCommunicator::Create(std::move(store), rank, size, options.gloo));
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace ddpio::comm
