// NumPy's .npy header, as ReadNpyFile hands it to ParseNpyHeader: the input's first 8 bytes give
// the file's size, the rest is the start of the file. Whatever is accepted must hold what the
// parser promises: a header inside the bytes given, a dtype ddpio reads, at most 32 dimensions, an
// element count that is the shape's product, and data that fills the file exactly.
#include <cstdint>
#include <cstring>

#include "ddpio/convert/npy_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t file_size = 0;
  std::memcpy(&file_size, data, 8);
  const absl::Span<const uint8_t> bytes(data + 8, size - 8);
  auto info = ddpio::convert::ParseNpyHeader(bytes, file_size);
  if (!info.ok()) return 0;
  if (info->data_offset > bytes.size() || info->shape.size() > 32) __builtin_trap();
  if (info->descr.size() > info->data_offset) __builtin_trap();
  const int b = info->item_bytes;
  if (b != 1 && b != 2 && b != 4 && b != 8) __builtin_trap();
  if (info->is_signed + info->is_unsigned + info->is_float != 1) __builtin_trap();
  if (info->fortran_order && info->shape.size() > 1) __builtin_trap();
  uint64_t count = 1;
  for (uint64_t n : info->shape) count *= n;  // cannot wrap: the parser checked
  if (count != info->element_count) __builtin_trap();
  if (info->data_offset + count * static_cast<uint64_t>(b) != file_size) __builtin_trap();
  return 0;
}
