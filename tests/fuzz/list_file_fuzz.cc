// Caffe-style list files ("relative/path label" per line), as `ddpio convert --list` reads them.
#include <cstdint>
#include <cstdio>
#include <string>

#include "ddpio/convert/convert_sources.h"
#include "tests/fuzz/scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ddpio::fuzz::Scratch scratch("list");
  static const std::string path = scratch.Path("list.txt");
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
