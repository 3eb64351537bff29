// A shared library opened when one of its functions is first called, not when the program starts.
//
// ddpio's GPU path calls the CUDA runtime, cuBLAS, NCCL and its own kernels by their C names. In
// the ddpio program and library those names are defined by small forwarding functions
// (lazy_cudart.cc, lazy_nccl.cc; trainer/lazy_cublas.cc, trainer/lazy_kernels.cc) that open the
// real library through a LazyLibrary on their first call and then call through a cached
// pointer. So a CPU-only process never maps the GPU libraries (`ldd ddpio` lists none, and
// `ddpio --version` starts in milliseconds), and a machine without them gets an error from the
// first GPU call, naming the library and why it did not load, instead of a program that does not
// start. The forwarders are weak symbols: the test stand-ins (tests/gpu_standin), linked in
// their place, win.
//
//   LazyLibrary& Cudart() {
//     static LazyLibrary* lib = new LazyLibrary("the CUDA runtime", {"libcudart.so.13"});
//     return *lib;
//   }
//   auto* fn = reinterpret_cast<decltype(&cudaMalloc)>(Cudart().Symbol("cudaMalloc"));
//
// Thread-safe: the library is opened once, by the first caller.
#ifndef DDPIO_DEVICE_LAZY_LIBRARY_H_
#define DDPIO_DEVICE_LAZY_LIBRARY_H_

#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ddpio::device {

class LazyLibrary {
 public:
  // `what`: how errors name it ("the CUDA runtime"). `candidates`: the file names dlopen tries,
  // in order (a soname, found as the dynamic loader finds any library; an absolute path).
  LazyLibrary(std::string what, std::vector<std::string> candidates);
  LazyLibrary(const LazyLibrary&) = delete;
  LazyLibrary& operator=(const LazyLibrary&) = delete;
  ~LazyLibrary();

  // The address of function `name`, opening the library on the first call; nullptr when the
  // library did not load or lacks the function (error() then says which, and it is logged once).
  void* Symbol(const char* name);
  // Opens the library if not yet tried; OK when it is loaded, else FailedPrecondition naming the
  // library and every candidate's dlopen error.
  absl::Status Load();
  // Whether the library is loaded, without trying (false before the first Symbol or Load).
  bool loaded() const;
  // The last failure (a load or a missing function) as text, "" if none; stable for the life of
  // this object, for the C error-string functions the forwarders stand in for.
  const char* error() const;

 private:
  void Open();

  const std::string what_;
  const std::vector<std::string> candidates_;
  mutable std::mutex mu_;
  std::once_flag once_;
  void* handle_ = nullptr;
  std::string error_;
};

// The folder holding the file (program or shared library) that contains this code, "" if unknown:
// where a library installed beside ddpio is looked for.
std::string FolderOfThisCode();

}  // namespace ddpio::device

#endif  // DDPIO_DEVICE_LAZY_LIBRARY_H_
