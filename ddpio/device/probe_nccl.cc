// Compiled with nccl.h; bound to libnccl, opened on first use (lazy_nccl.cc), in ddpio and to the
// stand-in in tests/gpu_standin.
#include <nccl.h>

#include "ddpio/device/probe.h"

namespace ddpio::device::internal {

void ProbeNccl(DeviceInfo* info) {
  info->nccl_compiled = true;
  int version = 0;
  if (ncclGetVersion(&version) == ncclSuccess) info->nccl_version = version;
}

}  // namespace ddpio::device::internal
