#include "ddpio/device/probe.h"

namespace ddpio::device::internal {

void ProbeNccl(DeviceInfo* info) { info->nccl_compiled = false; }

}  // namespace ddpio::device::internal
