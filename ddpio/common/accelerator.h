// What accelerator support this build has and what this machine offers.
//
// Every ddpio binary must run on a machine without a GPU and say which path it took. Tools call
// ProbeAccelerator() once at start and log DescribeAccelerator(). With the CUDA toolkit present
// at build time the probe asks the CUDA runtime; any error (no driver: 35, no device: 100) or a
// count of 0 means "no device" and the CPU paths are used. Thread-safe; the probe runs once.
#ifndef DDPIO_COMMON_ACCELERATOR_H_
#define DDPIO_COMMON_ACCELERATOR_H_

#include <string>

namespace ddpio {

struct AcceleratorInfo {
  bool cuda_compiled = false;  // built with DDPIO_WITH_CUDA
  bool nccl_compiled = false;  // built with DDPIO_WITH_NCCL
  int cuda_devices = 0;        // usable CUDA devices on this machine (0 without a GPU)
  int nccl_version = 0;        // ncclGetVersion() when compiled, e.g. 22805
  std::string why;             // why there is no device, e.g. "cudaGetDeviceCount: error 35 ..."
};

// Probes once per process and caches the answer.
const AcceleratorInfo& ProbeAccelerator();

// One line, e.g. "CPU path: CUDA compiled, no usable device (cudaGetDeviceCount: error 35
// cudaErrorInsufficientDriver); NCCL 2.28.5 compiled".
std::string DescribeAccelerator(const AcceleratorInfo& info);

namespace internal {
// Implemented in accelerator_cuda.cc or accelerator_nocuda.cc.
void ProbeCuda(AcceleratorInfo* info);
// Implemented in accelerator_nccl.cc or accelerator_nonccl.cc.
void ProbeNccl(AcceleratorInfo* info);
}  // namespace internal

}  // namespace ddpio

#endif  // DDPIO_COMMON_ACCELERATOR_H_
