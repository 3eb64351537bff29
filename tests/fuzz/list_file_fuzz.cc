// Caffe-style list files ("relative/path label" per line), as `ddpio convert --list` reads them.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "ddpio/convert/convert_sources.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/ddpio-fuzz-list-" + std::to_string(getpid()) + ".txt";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto listing = ddpio::convert::ReadListFile(path, "/nonexistent-root");
  if (listing.ok() &&
      listing->classes.size() > static_cast<size_t>(ddpio::convert::kMaxListClasses))
    __builtin_trap();
  return 0;
}
