// The one device probe of ddpio: what accelerator support this build has, what this machine
// offers, and which device a rank uses.
//
// Every ddpio binary must run on a machine without a GPU and say which path it took. Tools call
// Probe() once at start and log Describe(); the backend choice (comm/backend.h), the loader's
// pinned staging, the trainer's device model and its cuBLAS engine all read the same answer.
// With the CUDA toolkit present at build time the probe asks the CUDA runtime; any error (no
// driver: 35, no device: 100) or a count of 0 means "no device" and the CPU paths are used.
// Thread-safe; the probe runs once per process.
//
//   const device::DeviceInfo& info = device::Probe();
//   DDPIO_LOG(INFO) << device::Describe(info);
//   int gpu = device::DeviceForRank(local_rank, info.devices);
#ifndef DDPIO_DEVICE_PROBE_H_
#define DDPIO_DEVICE_PROBE_H_

#include <string>

namespace ddpio::device {

struct DeviceInfo {
  bool cuda_compiled = false;  // built with the CUDA runtime (DDPIO_WITH_CUDA)
  bool nccl_compiled = false;  // built with NCCL (DDPIO_WITH_NCCL)
  int devices = 0;             // usable CUDA devices on this machine (0 without a GPU)
  int nccl_version = 0;        // ncclGetVersion() when compiled, e.g. 22805
  std::string why;             // why there is no device, e.g. "cudaGetDeviceCount: error 35 ..."
};

// Probes once per process and caches the answer.
const DeviceInfo& Probe();

// One line, e.g. "CPU path: CUDA compiled, no usable device (cudaGetDeviceCount: error 35
// cudaErrorInsufficientDriver); NCCL 2.28.5 compiled".
std::string Describe(const DeviceInfo& info);

// The CUDA device of the process with `local_rank` on a node with `device_count` devices:
// local_rank modulo the count (ranks share devices round-robin when there are more ranks than
// devices); 0 when the count is 0, so a caller without a device still gets a valid index.
int DeviceForRank(int local_rank, int device_count);

namespace internal {
// Implemented in probe_cuda.cc or probe_nocuda.cc.
void ProbeCuda(DeviceInfo* info);
// Implemented in probe_nccl.cc or probe_nonccl.cc.
void ProbeNccl(DeviceInfo* info);
}  // namespace internal

}  // namespace ddpio::device

#endif  // DDPIO_DEVICE_PROBE_H_
