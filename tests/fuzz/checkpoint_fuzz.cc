// The trainer's checkpoint file, as `ddpio train --resume` reads it.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "ddpio/trainer/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = "/dev/shm/ddpio-fuzz-ckpt-" + std::to_string(getpid());
  static bool made = std::filesystem::create_directories(dir) || true;
  (void)made;
  FILE* f = std::fopen(ddpio::trainer::CheckpointPath(dir).c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  (void)ddpio::trainer::ReadCheckpoint(dir);
  return 0;
}
