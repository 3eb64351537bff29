// What an object store hands a reader before any record: the manifest (JSON), the record index
// (binary) and S3's XML answers. Each must parse to OK or an error for any bytes, and an index
// that parses must keep every record inside its file.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/s3/s3_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)ddpio::storage::remote::DecodeRemoteManifest(bytes, "fuzz");
  const std::vector<uint64_t> files = {1 << 20, 4096, 0};
  const uint64_t claimed = size >= 16 ? (size - 20) / 16 : 0;
  auto index = ddpio::storage::remote::DecodeRecordIndex(bytes, claimed, files, "fuzz");
  if (index.ok()) {
    for (const auto& r : *index) {
      if (r.file >= files.size() || r.offset + r.length > files[r.file]) __builtin_trap();
    }
  }
  (void)ddpio::storage::s3::XmlText(std::string(bytes), "Code");
  return 0;
}
