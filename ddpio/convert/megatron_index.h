// Megatron-LM's indexed dataset index (PREFIX.idx, beside PREFIX.bin): the MMIDIDX version-1 layout
// of megatron/core/datasets/indexed_dataset.py, as its _IndexWriter writes it, all little-endian:
//   "MMIDIDX\0\0" (9 bytes) | u64 version (1) | u8 dtype code | u64 sequence count S
//   | u64 document index count D (documents + 1)
//   | i32 sequence lengths [S] (elements) | i64 sequence pointers [S] (byte offsets in .bin)
//   | i64 document index [D] (the first sequence of each document, then S)
//   | i8 sequence modes [S] (multimodal datasets only; then the file ends)
// Sequence i is lengths[i] elements of the dtype at pointers[i] in the .bin. ParseMegatronIndex
// takes the bytes from outside as untrusted: every count is checked against the file's length
// before anything is allocated, and every sequence against the .bin's size, so a damaged or
// hostile index is an error naming the file and what is wrong, never a crash or unbounded memory.
// Pure functions; thread-safe.
#ifndef DDPIO_CONVERT_MEGATRON_INDEX_H_
#define DDPIO_CONVERT_MEGATRON_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddpio::convert {

// Megatron's DType codes.
enum class MegatronDType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

// "uint16", "int32", ... or "unknown(N)".
std::string MegatronDTypeName(MegatronDType dtype);

struct MegatronIndex {
  MegatronDType dtype = MegatronDType::kUint16;
  uint32_t element_bytes = 2;
  std::vector<int32_t> lengths;         // elements of each sequence
  std::vector<int64_t> pointers;        // byte offset of each sequence in the .bin
  std::vector<int64_t> document_index;  // documents + 1 entries, from 0 to the sequences
  bool has_modes = false;               // a multimodal index (the modes are not kept)

  uint64_t sequences() const { return lengths.size(); }
  uint64_t documents() const { return document_index.empty() ? 0 : document_index.size() - 1; }
};

inline constexpr char kMegatronIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};

// The index in `bytes` (the whole .idx file, named `where` in errors) of a .bin of `bin_bytes`
// bytes. InvalidArgument for a file that is not a version-1 MMIDIDX index, DataLoss for one that
// is damaged: counts past the file's end, a negative length, sequences overlapping or past the
// .bin's end, a document index that does not rise from 0 to the sequence count. Token ids must be
// whole numbers: a float dtype is InvalidArgument.
absl::StatusOr<MegatronIndex> ParseMegatronIndex(absl::Span<const uint8_t> bytes,
                                                 uint64_t bin_bytes, const std::string& where);

// The bytes of an index (what Megatron's _IndexWriter writes): for tests, and for tools that write
// Megatron datasets. Pointers are each sequence's offset when the sequences lie back to back.
std::vector<uint8_t> WriteMegatronIndex(MegatronDType dtype, absl::Span<const int32_t> lengths,
                                        absl::Span<const int64_t> document_index);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_MEGATRON_INDEX_H_
