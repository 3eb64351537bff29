#include "ddpio/storage/checksum.h"

#include <isa-l/crc.h>

#include <algorithm>

namespace ddpio::storage {

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
  // ISA-L's crc32_iscsi takes and returns the raw register (no final inversion), so invert on
  // the way in and out to get the standard CRC32C and allow chaining. It takes an int length:
  // feed it in chunks.
  auto* p = const_cast<unsigned char*>(static_cast<const unsigned char*>(data));
  uint32_t reg = ~crc;
  constexpr size_t kChunk = size_t{1} << 30;
  while (size > 0) {
    size_t n = std::min(size, kChunk);
    reg = crc32_iscsi(p, static_cast<int>(n), reg);
    p += n;
    size -= n;
  }
  return ~reg;
}

}  // namespace ddpio::storage
