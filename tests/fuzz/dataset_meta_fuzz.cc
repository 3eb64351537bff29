// The dataset's metadata entries (JSON written at conversion): header and completion marker.
#include <cstdint>
#include <string_view>

#include "ddpio/storage/dataset_info.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto header = ddpio::storage::DecodeHeader(text);
  if (header.ok())
    (void)ddpio::storage::EncodeHeader(*header);  // names may be any bytes: must not throw
  auto completion = ddpio::storage::DecodeCompletion(text);
  if (completion.ok()) (void)ddpio::storage::EncodeCompletion(*completion);
  return 0;
}
