// The first pages of a dataset file, checked before LMDB maps it: any bytes and any claimed
// file size give a layout or an error.
#include <cstdint>
#include <cstring>

#include "ddpio/storage/internal/lmdb_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t file_bytes;
  std::memcpy(&file_bytes, data, 8);
  auto layout = ddpio::storage::internal::CheckLmdbHeader(
      absl::Span<const uint8_t>(data + 8, size - 8), file_bytes, "fuzz.mdb");
  if (layout.ok() && layout->needed_bytes > file_bytes)
    __builtin_trap();  // never accepts a short file
  return 0;
}
