// Flat token files as `ddpio convert --from tokens` reads them: a raw file of uint16 or uint32 ids,
// or a .npy, split into documents at an EOS id, every document read. The first byte chooses the
// dtype (even: uint16, odd: uint32; for a .npy the file's own) and whether an EOS id (the next two
// bytes) applies; the rest is the file. Invariants: documents cover the ids in order, none is
// empty, none is longer than the cap, and every read gives whole ids of the dataset's width.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ddpio/convert/token_sources.h"
#include "tests/fuzz/scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ddpio::fuzz::Scratch scratch("tokens");
  static const std::string path = scratch.Path("train.bin");
  if (size < 3) return 0;
  const std::string dtype = (data[0] & 1) == 0 ? "uint16" : "uint32";
  const bool npy = size >= 9 && data[3] == 0x93;
  const int64_t eos = (data[0] & 2) != 0 ? int64_t{data[1]} | int64_t{data[2]} << 8 : -1;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data + 3, 1, size - 3, f);
  std::fclose(f);
  auto source = ddpio::convert::OpenTokenFileSource(path, npy ? "" : dtype, eos);
  if (!source.ok()) return 0;
  const int width = (*source)->width();
  if (width != 2 && width != 4) __builtin_trap();
  std::vector<uint8_t> payload;
  uint64_t ids = 0;
  for (uint64_t i = 0; i < (*source)->size() && i < 4096; ++i) {
    if (!(*source)->Read(i, 0, &payload).ok()) continue;  // an id that does not fit: DataLoss
    if (payload.empty() || payload.size() % width != 0) __builtin_trap();
    if (payload.size() / width > ddpio::convert::kMaxDocumentTokens) __builtin_trap();
    ids += payload.size() / width;
  }
  if (!npy && (*source)->size() < 4096 && ids > (size - 3) / (dtype == "uint16" ? 2 : 4))
    __builtin_trap();
  return 0;
}
