// The forwarding functions of lazy_library.h: each C function of a GPU library that ddpio calls
// is defined once, weak, as
//
//   extern "C" DDPIO_LAZY_WEAK cudaError_t cudaFree(void* p) {
//     DDPIO_LAZY_FORWARD(Cudart(), cudaFree, kMissing, p);
//   }
//
// which looks the function up in the library on its first call (and caches it) and returns
// `missing` when the library or the function is not there. decltype(&name) is the real header's
// declaration, so a forwarder whose parameters differ from the library's does not compile.
#ifndef DDPIO_DEVICE_INTERNAL_LAZY_FORWARD_H_
#define DDPIO_DEVICE_INTERNAL_LAZY_FORWARD_H_

#include "ddpio/device/lazy_library.h"

#define DDPIO_LAZY_WEAK __attribute__((weak))

#define DDPIO_LAZY_FORWARD(lib, name, missing, ...)                                \
  do {                                                                             \
    static const auto fn = reinterpret_cast<decltype(&name)>((lib).Symbol(#name)); \
    return fn == nullptr ? (missing) : fn(__VA_ARGS__);                            \
  } while (0)

#endif  // DDPIO_DEVICE_INTERNAL_LAZY_FORWARD_H_
