// CRC32C (Castagnoli) of byte ranges: the record checksum of the ddpio format.
//
// Chosen by measurement (docs/PERFORMANCE.md, "Checksum"): Intel ISA-L's crc32_iscsi runs at
// about twice memcpy speed here, so verifying every record costs little next to reading it.
// Pure function, thread-safe.
#ifndef DDPIO_STORAGE_CHECKSUM_H_
#define DDPIO_STORAGE_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace ddpio::storage {

// CRC32C of [data, data + size), continuing from `crc` (0 to start). Crc32c("123456789") ==
// 0xE3069283, the standard check value.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_CHECKSUM_H_
