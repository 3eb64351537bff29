// Choosing and creating a Communicator backend: gloo, nccl, or auto.
//
// auto = NCCL when ddpio was built with NCCL and a CUDA device is usable, else Gloo; the choice
// comes with the reason, which the caller logs. Asking for nccl without NCCL compiled in, or
// without a usable device, is a FailedPrecondition that says which. Any error from
// cudaGetDeviceCount (no driver: 35, no device: 100) counts as "no device".
#ifndef DDPIO_COMM_BACKEND_H_
#define DDPIO_COMM_BACKEND_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/comm/gloo_communicator.h"
#include "ddpio/comm/store.h"
#include "ddpio/device/probe.h"

namespace ddpio::comm {

enum class BackendKind { kAuto, kGloo, kNccl };

absl::StatusOr<BackendKind> ParseBackend(std::string_view name);  // "auto", "gloo", "nccl"
std::string BackendName(BackendKind kind);

struct BackendChoice {
  BackendKind kind = BackendKind::kGloo;  // never kAuto
  std::string why;                        // e.g. "auto: gloo (no usable CUDA device: ...)"
};

// Pure decision, testable with any probe (device::Probe() for this process: whether NCCL is
// compiled in, the usable CUDA devices and, when there are none, why).
absl::StatusOr<BackendChoice> ChooseBackend(BackendKind requested, const device::DeviceInfo& probe);

struct CommOptions {
  GlooOptions gloo;  // hostname; gloo.timeout is the connect timeout of both backends
  int local_rank =
      0;  // NCCL: device = device::DeviceForRank(local_rank, devices) unless `device` is set
  int device = -1;
};

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const BackendChoice& choice,
                                                                 std::shared_ptr<Store> store,
                                                                 int rank, int size,
                                                                 const CommOptions& options);

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_BACKEND_H_
