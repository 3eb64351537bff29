// What the token sources share (token_sources.h): a regular file read with pread, its identity
// for a resume's fingerprint, and ids of any integer dtype widened or narrowed into a dataset's
// 2- or 4-byte ids with every id checked. Thread-safe: pread only, no shared offset.
#ifndef DDPIO_CONVERT_INTERNAL_TOKEN_FILE_H_
#define DDPIO_CONVERT_INTERNAL_TOKEN_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/common/fd.h"

namespace ddpio::convert::internal {

class TokenFile {
 public:
  // NotFound / PermissionDenied / InvalidArgument (not a regular file) naming `path`.
  static absl::StatusOr<TokenFile> Open(const std::string& path, const std::string& what);

  // `bytes` bytes at `offset` into *out (resized). DataLoss naming the file when it ends sooner
  // (cut short under the conversion).
  absl::Status Read(uint64_t offset, uint64_t bytes, std::vector<uint8_t>* out) const;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // "path size mtime_ns": changes when the file is replaced or rewritten.
  const std::string& identity() const { return identity_; }

 private:
  TokenFile(std::string path, Fd fd, uint64_t size, std::string identity)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size), identity_(std::move(identity)) {}

  std::string path_;
  Fd fd_;
  uint64_t size_ = 0;
  std::string identity_;
};

// How a source's ids are stored in its file.
struct IdType {
  int bytes = 2;  // 1, 2, 4 or 8
  bool is_signed = false;
};

// The dataset's id width for ids of `type`: 2 for 8- and 16-bit ids, 4 for wider ones.
inline int StoredWidth(IdType type) { return type.bytes <= 2 ? 2 : 4; }

// `count` ids of `type` (little-endian) from `in` into `width`-byte ids in *out (replaced).
// DataLoss naming `where` and the position for an id that does not fit (negative, or over the
// width's largest).
absl::Status ConvertIds(absl::Span<const uint8_t> in, IdType type, int width,
                        const std::string& where, std::vector<uint8_t>* out);

// Appends `id` as `width` bytes little-endian.
void PutId(uint32_t id, int width, std::vector<uint8_t>* out);

}  // namespace ddpio::convert::internal

#endif  // DDPIO_CONVERT_INTERNAL_TOKEN_FILE_H_
