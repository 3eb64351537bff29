// A sharded dataset's manifest (ddpio-shards.json): JSON read from the dataset's folder.
#include <cstdint>
#include <string_view>

#include "ddpio/storage/shards.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto manifest = ddpio::storage::DecodeShardManifest(text);
  if (manifest.ok()) {
    // What decodes re-encodes and decodes the same (paths and fingerprints may be any bytes).
    auto again =
        ddpio::storage::DecodeShardManifest(ddpio::storage::EncodeShardManifest(*manifest));
    if (again.ok() && again->shards.size() != manifest->shards.size()) __builtin_trap();
  }
  return 0;
}
