#include "ddpio/device/gpu_libraries.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

// Set by ddpio/device/CMakeLists.txt in builds with CUDA; empty otherwise.
#ifndef DDPIO_CUDART_SONAME
#define DDPIO_CUDART_SONAME ""
#endif
#ifndef DDPIO_CUBLAS_SONAME
#define DDPIO_CUBLAS_SONAME ""
#endif
#ifndef DDPIO_NCCL_SONAME
#define DDPIO_NCCL_SONAME ""
#endif
#ifndef DDPIO_GPU_LIBDIR
#define DDPIO_GPU_LIBDIR ""
#endif
#ifndef DDPIO_KERNELS_INSTALL_LIBDIR
#define DDPIO_KERNELS_INSTALL_LIBDIR "lib"
#endif
#ifndef DDPIO_KERNELS_INSTALL_PATH
#define DDPIO_KERNELS_INSTALL_PATH ""
#endif
#ifndef DDPIO_KERNELS_BUILD_PATH
#define DDPIO_KERNELS_BUILD_PATH ""
#endif

namespace ddpio::device {
namespace {

constexpr char kKernelsFile[] = "libddpio_kernels.so";

// The soname, then the same file in the toolkit's folder found at build time.
std::vector<std::string> Candidates(const std::string& soname) {
  std::vector<std::string> out;
  if (soname.empty()) return out;
  out.push_back(soname);
  if (!std::string(DDPIO_GPU_LIBDIR).empty())
    out.push_back(absl::StrCat(DDPIO_GPU_LIBDIR, "/", soname));
  return out;
}

std::vector<std::string> KernelCandidates() {
  std::vector<std::string> out;
  if (const std::string here = FolderOfThisCode(); !here.empty()) {
    out.push_back(absl::StrCat(here, "/", kKernelsFile));
    // An installed program in PREFIX/bin, its kernels in PREFIX/LIBDIR.
    out.push_back(absl::StrCat(here, "/../", DDPIO_KERNELS_INSTALL_LIBDIR, "/", kKernelsFile));
  }
  for (const std::string path : {DDPIO_KERNELS_INSTALL_PATH, DDPIO_KERNELS_BUILD_PATH}) {
    if (!path.empty()) out.push_back(path);
  }
  return out;
}

LazyLibrary* Make(const char* what, std::vector<std::string> candidates) {
  return new LazyLibrary(what, std::move(candidates));  // never destroyed: usable at exit
}

std::string Line(const char* what, const char* file, LazyLibrary& lib) {
  const std::string error = lib.error();
  return absl::StrCat(what, " (", file, "): ",
                      lib.loaded()    ? "loaded"
                      : error.empty() ? "opened on first use, not loaded yet"
                                      : error);
}

}  // namespace

LazyLibrary& CudaRuntimeLibrary() {
  static LazyLibrary* lib = Make("the CUDA runtime", Candidates(DDPIO_CUDART_SONAME));
  return *lib;
}

LazyLibrary& NcclLibrary() {
  static LazyLibrary* lib = Make("NCCL", Candidates(DDPIO_NCCL_SONAME));
  return *lib;
}

LazyLibrary& CublasLibrary() {
  static LazyLibrary* lib = Make("cuBLAS", Candidates(DDPIO_CUBLAS_SONAME));
  return *lib;
}

LazyLibrary& KernelsLibrary() {
  static LazyLibrary* lib = Make("ddpio's CUDA kernels", KernelCandidates());
  return *lib;
}

std::string DescribeGpuLibraries() {
  if (std::string(DDPIO_CUDART_SONAME).empty()) return "";
  std::string out = Line("CUDA runtime", DDPIO_CUDART_SONAME, CudaRuntimeLibrary());
  if (!std::string(DDPIO_NCCL_SONAME).empty()) {
    absl::StrAppend(&out, "\n", Line("NCCL", DDPIO_NCCL_SONAME, NcclLibrary()));
  }
  if (!std::string(DDPIO_CUBLAS_SONAME).empty()) {
    absl::StrAppend(&out, "\n", Line("cuBLAS", DDPIO_CUBLAS_SONAME, CublasLibrary()));
  }
  if (!std::string(DDPIO_KERNELS_BUILD_PATH).empty()) {
    absl::StrAppend(&out, "\n", Line("ddpio kernels", kKernelsFile, KernelsLibrary()));
  }
  return out;
}

}  // namespace ddpio::device
