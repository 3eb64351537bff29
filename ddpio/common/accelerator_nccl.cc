// Compiled only when NCCL was found.
#include <nccl.h>

#include "ddpio/common/accelerator.h"

namespace ddpio::internal {

void ProbeNccl(AcceleratorInfo* info) {
  info->nccl_compiled = true;
  int version = 0;
  if (ncclGetVersion(&version) == ncclSuccess) info->nccl_version = version;
}

}  // namespace ddpio::internal
