// The trainer's checkpoint file, as `ddpio train --resume` reads it.
#include <cstdint>
#include <cstdio>
#include <string>

#include "ddpio/trainer/checkpoint.h"
#include "tests/fuzz/scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ddpio::fuzz::Scratch scratch("ckpt");
  const std::string& dir = scratch.dir();
  FILE* f = std::fopen(ddpio::trainer::CheckpointPath(dir).c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  (void)ddpio::trainer::ReadCheckpoint(dir);
  return 0;
}
