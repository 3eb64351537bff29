#include "ddpio/convert/source_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::convert {
namespace {

// An error that is this file's fault (skippable with --skip-invalid), or the machine's.
absl::Status FileError(int err, const char* what) {
  switch (err) {
    case ELOOP:
    case EIO:
    case ENXIO:
    case ENODEV:
    case EISDIR:
    case ENAMETOOLONG:
      return absl::DataLossError(absl::StrCat(what, ": ", std::strerror(err)));
    default:
      return ErrnoToStatus(err, what);
  }
}

absl::StatusOr<std::vector<uint8_t>> ReadWholeFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO named like a photo must not wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return FileError(errno, "cannot open");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return FileError(err, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::DataLossError(S_ISFIFO(st.st_mode)   ? "not a regular file (a FIFO)"
                               : S_ISCHR(st.st_mode)  ? "not a regular file (a character device)"
                               : S_ISBLK(st.st_mode)  ? "not a regular file (a block device)"
                               : S_ISSOCK(st.st_mode) ? "not a regular file (a socket)"
                                                      : "not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxSourceFileBytes) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat("file of ", st.st_size,
                                            " bytes, more than the limit of ", kMaxSourceFileBytes,
                                            " for one image"));
  }
  std::vector<uint8_t> data;
  data.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return FileError(err, "cannot read");
    }
    if (n == 0) break;
    if (data.size() + static_cast<size_t>(n) > kMaxSourceFileBytes) {  // it grew while read
      ::close(fd);
      return absl::DataLossError(
          absl::StrCat("file grew past the limit of ", kMaxSourceFileBytes, " bytes"));
    }
    data.insert(data.end(), buf, buf + n);
  }
  ::close(fd);
  return data;
}

}  // namespace

std::string FileSourceReader::Describe(const SourceEntry& entry) const {
  return (std::filesystem::path(root_) / entry.relative).string();
}

absl::StatusOr<SourceItem> FileSourceReader::Read(uint64_t, const SourceEntry& entry) {
  const std::string path = Describe(entry);
  auto data = ReadWholeFile(path);
  if (!data.ok()) return Annotate(data.status(), path);
  SourceItem item;
  item.bytes = std::move(data).value();
  return item;
}

}  // namespace ddpio::convert
