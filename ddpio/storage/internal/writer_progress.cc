#include "ddpio/storage/internal/writer_progress.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "ddpio/common/internal/json_parse.h"
#include "ddpio/storage/internal/json_fields.h"

namespace ddpio::storage::internal {

absl::StatusOr<WriterProgress> ParseWriterProgress(std::string_view text) {
  auto j = ParseJson(text, "the entry", kMaxWriterEntryBytes);
  if (!j.ok()) {
    return absl::DataLossError(
        absl::StrCat("writer progress entry is malformed (", j.status().message(), ")"));
  }
  WriterProgress progress;
  if (!GetU64(*j, "records", &progress.records) ||
      !GetU64(*j, "payload_bytes", &progress.payload_bytes)) {
    return absl::DataLossError("writer progress entry is malformed");
  }
  return progress;
}

}  // namespace ddpio::storage::internal
