#include "ddpio/device/probe.h"

#include "absl/strings/str_cat.h"

namespace ddpio::device {

const DeviceInfo& Probe() {
  static const DeviceInfo* info = [] {
    auto* i = new DeviceInfo();  // never destroyed: usable during static teardown
    internal::ProbeCuda(i);
    internal::ProbeNccl(i);
    return i;
  }();
  return *info;
}

std::string Describe(const DeviceInfo& info) {
  std::string out;
  if (info.devices > 0) {
    out = absl::StrCat("GPU path: ", info.devices, " CUDA device(s)");
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

int DeviceForRank(int local_rank, int device_count) {
  return device_count > 0 ? local_rank % device_count : 0;
}

}  // namespace ddpio::device
