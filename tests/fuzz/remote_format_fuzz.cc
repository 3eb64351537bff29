// What an object store hands a reader before any record: the manifest (JSON), the record index
// (binary, with or without a token dataset's document lengths) and S3's XML answers. Each must
// parse to OK or an error for any bytes; an index that parses must keep every record inside its
// file and carry a length for every record exactly when asked to, and checking those lengths
// against a token dataset is OK or DataLoss.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/s3/s3_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace remote = ddpio::storage::remote;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)remote::DecodeRemoteManifest(bytes, "fuzz");
  const std::vector<uint64_t> files = {1 << 20, 4096, 0};
  for (const bool lengths : {false, true}) {
    const uint64_t claimed = size >= 20 ? (size - 20) / (lengths ? 20 : 16) : 0;
    auto index = remote::DecodeRecordIndex(bytes, claimed, files, lengths, "fuzz");
    if (!index.ok()) continue;
    for (const auto& r : index->locations) {
      if (r.file >= files.size() || r.offset + r.length > files[r.file]) __builtin_trap();
    }
    if (index->document_lengths.size() != (lengths ? index->locations.size() : 0)) {
      __builtin_trap();
    }
    ddpio::storage::DatasetHeader tokens;
    tokens.format_version = ddpio::storage::kTokensFormatVersion;
    tokens.tokens.width = 2;
    const ddpio::storage::DatasetCompletion completion{claimed, size, 0};
    const absl::Status checked = remote::CheckDocumentLengths(*index, tokens, completion, "fuzz");
    if (!checked.ok() && !absl::IsDataLoss(checked)) __builtin_trap();
  }
  (void)ddpio::storage::s3::XmlText(std::string(bytes), "Code");
  return 0;
}
