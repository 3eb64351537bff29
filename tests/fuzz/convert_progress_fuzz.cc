// The progress entry `ddpio convert --resume` continues from.
#include <cstdint>
#include <string>
#include <vector>

#include "ddpio/convert/convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t next = 0;
  std::vector<ddpio::convert::SkippedFile> skipped;
  if (ddpio::convert::ParseConvertProgress(std::string(reinterpret_cast<const char*>(data), size),
                                           &next, &skipped)
          .ok() &&
      skipped.size() > next) {
    __builtin_trap();  // never more skipped entries than entries done
  }
  return 0;
}
