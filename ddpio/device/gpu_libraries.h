// The GPU libraries ddpio opens on first use (lazy_library.h), one LazyLibrary each, and what
// `ddpio info` says about them. Their file names are fixed when ddpio is built (the toolkit's and
// NCCL's major versions); each is looked for as the dynamic loader finds any library, then in the
// folder the toolkit was found in at build time.
#ifndef DDPIO_DEVICE_GPU_LIBRARIES_H_
#define DDPIO_DEVICE_GPU_LIBRARIES_H_

#include <string>

#include "ddpio/device/lazy_library.h"

namespace ddpio::device {

LazyLibrary& CudaRuntimeLibrary();  // libcudart.so.MAJOR
LazyLibrary& NcclLibrary();         // libnccl.so.MAJOR
LazyLibrary& CublasLibrary();       // libcublas.so.MAJOR (the trainer's device model and engine)
// ddpio's own kernels (libddpio_kernels.so, built by nvcc beside the program): looked for beside
// the code that calls them, in ../LIBDIR from there (an installed program), in the install's
// library folder, and where the build put it.
LazyLibrary& KernelsLibrary();

// One line per library this build opens on first use: its name and whether it loaded, e.g.
// "cuBLAS (libcublas.so.13): not loaded yet". Loads none.
std::string DescribeGpuLibraries();

}  // namespace ddpio::device

#endif  // DDPIO_DEVICE_GPU_LIBRARIES_H_
