#include "ddpio/convert/megatron_index.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"

namespace ddpio::convert {
namespace {

constexpr uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = sizeof(kMegatronIndexMagic) + 8 + 1 + 8 + 8;

// Bytes per element of a dtype; 0 for a code Megatron does not define.
uint32_t ElementBytes(uint8_t code) {
  switch (static_cast<MegatronDType>(code)) {
    case MegatronDType::kUint8:
    case MegatronDType::kInt8:
      return 1;
    case MegatronDType::kInt16:
    case MegatronDType::kUint16:
      return 2;
    case MegatronDType::kInt32:
    case MegatronDType::kFloat32:
      return 4;
    case MegatronDType::kInt64:
    case MegatronDType::kFloat64:
      return 8;
  }
  return 0;
}

absl::Status Damaged(const std::string& where, const std::string& what) {
  return absl::DataLossError(absl::StrCat("Megatron index ", where, ": ", what));
}

}  // namespace

std::string MegatronDTypeName(MegatronDType dtype) {
  switch (dtype) {
    case MegatronDType::kUint8:
      return "uint8";
    case MegatronDType::kInt8:
      return "int8";
    case MegatronDType::kInt16:
      return "int16";
    case MegatronDType::kInt32:
      return "int32";
    case MegatronDType::kInt64:
      return "int64";
    case MegatronDType::kFloat64:
      return "float64";
    case MegatronDType::kFloat32:
      return "float32";
    case MegatronDType::kUint16:
      return "uint16";
  }
  return absl::StrCat("unknown(", static_cast<int>(dtype), ")");
}

absl::StatusOr<MegatronIndex> ParseMegatronIndex(absl::Span<const uint8_t> bytes,
                                                 uint64_t bin_bytes, const std::string& where) {
  if (bytes.size() < sizeof(kMegatronIndexMagic) ||
      std::memcmp(bytes.data(), kMegatronIndexMagic, sizeof(kMegatronIndexMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Megatron index ", where,
        ": not an MMIDIDX index (Megatron-LM's indexed dataset: PREFIX.idx beside PREFIX.bin)"));
  }
  if (bytes.size() < kHeaderBytes) {
    return Damaged(where, absl::StrCat("its header is cut short (", bytes.size(), " of ",
                                       kHeaderBytes, " bytes)"));
  }
  ByteReader r(bytes.data() + sizeof(kMegatronIndexMagic),
               bytes.size() - sizeof(kMegatronIndexMagic));
  uint64_t version = 0, sequences = 0, entries = 0;
  uint8_t code = 0;
  r.Le(&version);
  r.Le(&code);
  r.Le(&sequences);
  r.Le(&entries);
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("Megatron index ", where, ": version ", version, " (ddpio reads version 1)"));
  }
  const uint32_t element = ElementBytes(code);
  if (element == 0) {
    return Damaged(where, absl::StrCat("dtype code ", static_cast<int>(code),
                                       " is not one of Megatron's (1-8)"));
  }
  const auto dtype = static_cast<MegatronDType>(code);
  if (dtype == MegatronDType::kFloat32 || dtype == MegatronDType::kFloat64) {
    return absl::InvalidArgumentError(absl::StrCat("Megatron index ", where, ": its elements are ",
                                                   MegatronDTypeName(dtype),
                                                   ", not token ids (whole numbers)"));
  }
  // Every count against what is left of the file, before anything is allocated: lengths (4),
  // pointers (8) per sequence, 8 per document index entry; modes (1 per sequence) may follow.
  const uint64_t left = r.left();
  if (sequences > left / 12 || entries > (left - sequences * 12) / 8) {
    return Damaged(where,
                   absl::StrCat(sequences, " sequences and ", entries,
                                " document index entries do not fit its ", bytes.size(), " bytes"));
  }
  const uint64_t tail = left - sequences * 12 - entries * 8;
  if (tail != 0 && tail != sequences) {
    return Damaged(where, absl::StrCat(tail, " bytes past the document index (", sequences,
                                       " sequence modes, or none, belong there)"));
  }
  MegatronIndex index;
  index.dtype = dtype;
  index.element_bytes = element;
  index.has_modes = tail != 0 && sequences != 0;
  r.LeAll(sequences, &index.lengths);
  r.LeAll(sequences, &index.pointers);
  r.LeAll(entries, &index.document_index);
  // Sequences lie in the .bin without overlapping, in order (as the writer puts them).
  uint64_t end = 0;
  for (uint64_t i = 0; i < sequences; ++i) {
    const int64_t n = index.lengths[i], at = index.pointers[i];
    if (n < 0) return Damaged(where, absl::StrCat("sequence ", i, " has length ", n));
    if (at < 0 || static_cast<uint64_t>(at) < end) {
      return Damaged(where, absl::StrCat("sequence ", i, " starts at byte ", at,
                                         ", before the end of the one before it (", end, ")"));
    }
    const uint64_t size = static_cast<uint64_t>(n) * element;
    if (static_cast<uint64_t>(at) > bin_bytes || size > bin_bytes - static_cast<uint64_t>(at)) {
      return Damaged(where,
                     absl::StrCat("sequence ", i, " (", n, " elements at byte ", at,
                                  ") runs past the end of the .bin (", bin_bytes, " bytes)"));
    }
    end = static_cast<uint64_t>(at) + size;
  }
  if (entries == 0 || index.document_index.front() != 0 ||
      index.document_index.back() != static_cast<int64_t>(sequences)) {
    return Damaged(
        where, absl::StrCat("its document index must run from 0 to the ", sequences, " sequences"));
  }
  for (uint64_t d = 1; d < entries; ++d) {
    if (index.document_index[d] < index.document_index[d - 1]) {
      return Damaged(
          where, absl::StrCat("document ", d - 1, " ends before it starts (sequence ",
                              index.document_index[d], " < ", index.document_index[d - 1], ")"));
    }
  }
  return index;
}

std::vector<uint8_t> WriteMegatronIndex(MegatronDType dtype, absl::Span<const int32_t> lengths,
                                        absl::Span<const int64_t> document_index) {
  std::string out(kMegatronIndexMagic, sizeof(kMegatronIndexMagic));
  PutLe<uint64_t>(&out, kVersion);
  PutLe<uint8_t>(&out, static_cast<uint8_t>(dtype));
  PutLe<uint64_t>(&out, lengths.size());
  PutLe<uint64_t>(&out, document_index.size());
  for (int32_t n : lengths) PutLe<int32_t>(&out, n);
  int64_t at = 0;
  for (int32_t n : lengths) {
    PutLe<int64_t>(&out, at);
    at += static_cast<int64_t>(n) * ElementBytes(static_cast<uint8_t>(dtype));
  }
  for (int64_t d : document_index) PutLe<int64_t>(&out, d);
  return std::vector<uint8_t>(out.begin(), out.end());
}

}  // namespace ddpio::convert
