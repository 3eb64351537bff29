#include "ddpio/convert/internal/token_file.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::convert::internal {

absl::StatusOr<TokenFile> TokenFile::Open(const std::string& path, const std::string& what) {
  uint64_t size = 0;
  DDPIO_ASSIGN_OR_RETURN(Fd fd, OpenRegularFile(path, what, &size));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat(what, " ", path));
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  std::string identity = absl::StrCat(path, " ", size, " ", mtime_ns);
  return TokenFile(path, std::move(fd), size, std::move(identity));
}

absl::Status TokenFile::Read(uint64_t offset, uint64_t bytes, std::vector<uint8_t>* out) const {
  out->resize(static_cast<size_t>(bytes));
  uint64_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::pread(fd_.get(), out->data() + got, static_cast<size_t>(bytes - got),
                              static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, absl::StrCat("reading ", path_));
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(path_, " ends at byte ", offset + got, " but was ",
                                              size_,
                                              " bytes when the conversion opened it (changed or "
                                              "cut short under the conversion)"));
    }
    got += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

void PutId(uint32_t id, int width, std::vector<uint8_t>* out) {
  out->push_back(static_cast<uint8_t>(id));
  out->push_back(static_cast<uint8_t>(id >> 8));
  if (width == 4) {
    out->push_back(static_cast<uint8_t>(id >> 16));
    out->push_back(static_cast<uint8_t>(id >> 24));
  }
}

absl::Status ConvertIds(absl::Span<const uint8_t> in, IdType type, int width,
                        const std::string& where, std::vector<uint8_t>* out) {
  const size_t count = in.size() / static_cast<size_t>(type.bytes);
  if (!type.is_signed && type.bytes == width) {  // stored as they are: every value is an id
    out->assign(in.begin(), in.begin() + count * static_cast<size_t>(width));
    return absl::OkStatus();
  }
  out->clear();
  out->reserve(count * static_cast<size_t>(width));
  const uint64_t largest = width == 2 ? 0xFFFF : 0xFFFFFFFF;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* p = in.data() + i * static_cast<size_t>(type.bytes);
    uint64_t raw = 0;
    for (int b = 0; b < type.bytes; ++b) raw |= uint64_t{p[b]} << (8 * b);
    const bool negative = type.is_signed && (p[type.bytes - 1] & 0x80) != 0;
    if (negative || raw > largest) {
      int64_t value = static_cast<int64_t>(raw);
      if (negative && type.bytes < 8) value -= int64_t{1} << (8 * type.bytes);
      return absl::DataLossError(absl::StrCat(where, ": id ", i, " is ",
                                              negative ? absl::StrCat(value) : absl::StrCat(raw),
                                              ", not a token id (0 to ", largest, ")"));
    }
    PutId(static_cast<uint32_t>(raw), width, out);
  }
  return absl::OkStatus();
}

}  // namespace ddpio::convert::internal
