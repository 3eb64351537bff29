// Megatron-LM's MMIDIDX index (PREFIX.idx), as `ddpio convert --from megatron` reads it: the
// input's first 8 bytes give the .bin's size, the rest is the index. Whatever is accepted must hold
// what the parser promises: sequences in order within the .bin, a document index from 0 to them.
#include <cstdint>
#include <cstring>

#include "ddpio/convert/megatron_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t bin_bytes = 0;
  std::memcpy(&bin_bytes, data, 8);
  auto index = ddpio::convert::ParseMegatronIndex(absl::MakeConstSpan(data + 8, size - 8),
                                                  bin_bytes, "fuzz.idx");
  if (!index.ok()) return 0;
  uint64_t end = 0;
  for (uint64_t i = 0; i < index->sequences(); ++i) {
    if (index->lengths[i] < 0 || static_cast<uint64_t>(index->pointers[i]) < end) __builtin_trap();
    end = static_cast<uint64_t>(index->pointers[i]) +
          static_cast<uint64_t>(index->lengths[i]) * index->element_bytes;
    if (end > bin_bytes) __builtin_trap();
  }
  if (index->document_index.front() != 0 ||
      index->document_index.back() != static_cast<int64_t>(index->sequences()))
    __builtin_trap();
  return 0;
}
