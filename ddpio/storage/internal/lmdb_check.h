// What LMDB does not check before trusting a file: its two meta pages and the file's length.
// Private to storage/.
//
// LMDB maps the data file and follows the newest meta page's roots wherever they point; a file
// cut short (an interrupted copy) makes every reader die of SIGBUS, and a damaged meta page can
// crash inside liblmdb. CheckLmdbHeader validates, from the file's first bytes and its size,
// what LMDB would otherwise take on trust: magic, format version, page size, both meta pages,
// the newest one's last page inside the file and its roots at or below that page. A pure
// function of its inputs (the fuzz target feeds it bytes).
#ifndef DDPIO_STORAGE_INTERNAL_LMDB_CHECK_H_
#define DDPIO_STORAGE_INTERNAL_LMDB_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddpio::storage::internal {

struct LmdbLayout {
  uint32_t page_size = 0;
  uint64_t last_page = 0;     // of the newest meta page
  uint64_t needed_bytes = 0;  // (last_page + 1) * page_size: what the file must hold
  uint64_t txnid = 0;
};

// The bytes needed from the start of the file: two meta pages of the largest page size LMDB
// supports.
inline constexpr size_t kLmdbHeaderBytes = 2 * 65536;

// `head`: the file's first min(size, kLmdbHeaderBytes) bytes; `file_bytes`: its size. DataLoss
// naming `path` and what is wrong ("truncated: N of M bytes — was the copy interrupted?", "meta
// page 1: bad magic", ...); FailedPrecondition for an LMDB format version this build cannot read.
absl::StatusOr<LmdbLayout> CheckLmdbHeader(absl::Span<const uint8_t> head, uint64_t file_bytes,
                                           const std::string& path);

// Reads the head of `data_file` and checks it (errors as above; NotFound / PermissionDenied
// opening it).
absl::StatusOr<LmdbLayout> CheckLmdbFile(const std::string& data_file);

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_LMDB_CHECK_H_
