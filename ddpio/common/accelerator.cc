#include "ddpio/common/accelerator.h"

#include "absl/strings/str_cat.h"

namespace ddpio {

const AcceleratorInfo& ProbeAccelerator() {
  static const AcceleratorInfo* info = [] {
    auto* i = new AcceleratorInfo();
    internal::ProbeCuda(i);
    internal::ProbeNccl(i);
    return i;
  }();
  return *info;
}

std::string DescribeAccelerator(const AcceleratorInfo& info) {
  std::string out;
  if (info.cuda_devices > 0) {
    out = absl::StrCat("GPU path: ", info.cuda_devices, " CUDA device(s)");
  } else if (info.cuda_compiled) {
    out = absl::StrCat("CPU path: CUDA compiled, no usable device (", info.why, ")");
  } else {
    out = "CPU path: built without CUDA";
  }
  if (info.nccl_compiled) {
    int v = info.nccl_version;
    absl::StrAppend(&out, "; NCCL ", v / 10000, ".", (v / 100) % 100, ".", v % 100, " compiled");
  } else {
    absl::StrAppend(&out, "; built without NCCL");
  }
  return out;
}

}  // namespace ddpio
