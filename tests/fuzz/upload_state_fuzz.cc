// The resumable upload's state file (DATASET/ddpio-upload.json), left by an earlier run and read
// back by the next: a state that parses belongs to the upload asked for and holds no empty
// multipart upload id or ETag (an empty one would resume nothing, or match any object).
#include <cstdint>
#include <string>
#include <string_view>

#include "ddpio/storage/internal/upload_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kUrl = "s3://bucket/prefix";
  static const std::string kDataset = "0123456789abcdef-89abcdef-0123456789abcdef0123456789abcdef";
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto state = ddpio::storage::internal::ParseUploadState(text, kUrl, kDataset);
  if (!state.has_value()) return 0;
  if (size > ddpio::storage::internal::kMaxUploadStateBytes) __builtin_trap();
  if (state->url != kUrl || state->dataset != kDataset) __builtin_trap();  // another upload's
  for (const auto& [object, id] : state->upload_ids) {
    if (id.empty()) __builtin_trap();
  }
  for (const auto& [object, etag] : state->etags) {
    if (etag.empty()) __builtin_trap();
  }
  return 0;
}
