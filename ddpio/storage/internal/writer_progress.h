// The writer's progress entry (meta key "writer", JSON {"records": n, "payload_bytes": b}),
// written with every commit and read back when a conversion resumes (DatasetWriter::Resume).
// The entry lives in the dataset, so it may be damaged or written by anything: the parse is a pure
// function of its text, bounded in size and nesting (ParseJson), which the fuzz target
// writer_progress_fuzz feeds bytes. Private to storage/. Thread-safe (pure).
#ifndef DDPIO_STORAGE_INTERNAL_WRITER_PROGRESS_H_
#define DDPIO_STORAGE_INTERNAL_WRITER_PROGRESS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace ddpio::storage::internal {

struct WriterProgress {
  uint64_t records = 0;        // committed so far
  uint64_t payload_bytes = 0;  // of their payloads
};

// Two counts: far below this.
inline constexpr uint64_t kMaxWriterEntryBytes = 64 << 10;

// The counts `text` holds. DataLoss "writer progress entry is malformed (WHY)" when it is over
// kMaxWriterEntryBytes, nested too deep or not JSON; DataLoss "writer progress entry is
// malformed" when it is not an object whose "records" and "payload_bytes" are integers in
// [0, 2^64). The caller puts the dataset's path in front.
absl::StatusOr<WriterProgress> ParseWriterProgress(std::string_view text);

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_WRITER_PROGRESS_H_
