// The writer's progress entry (meta key "writer"), read back when a conversion resumes: any bytes
// are DataLoss or two counts, and the counts are integers written out in the text (never a float
// cast, a negative number wrapped, or a default left in place).
#include <cstdint>
#include <string>
#include <string_view>

#include "ddpio/storage/internal/writer_progress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto progress = ddpio::storage::internal::ParseWriterProgress(text);
  if (!progress.ok()) {
    if (progress.status().code() != absl::StatusCode::kDataLoss) __builtin_trap();
    return 0;
  }
  if (size > ddpio::storage::internal::kMaxWriterEntryBytes) __builtin_trap();
  if (text.find(std::to_string(progress->records)) == std::string_view::npos ||
      text.find(std::to_string(progress->payload_bytes)) == std::string_view::npos) {
    __builtin_trap();
  }
  return 0;
}
