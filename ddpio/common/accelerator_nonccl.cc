#include "ddpio/common/accelerator.h"

namespace ddpio::internal {

void ProbeNccl(AcceleratorInfo* info) { info->nccl_compiled = false; }

}  // namespace ddpio::internal
