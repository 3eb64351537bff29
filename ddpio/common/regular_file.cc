#include "ddpio/common/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio {
namespace {

const char* KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

absl::StatusOr<Fd> OpenRegularFile(const std::string& path, const std::string& what,
                                   uint64_t* bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return ErrnoToStatus(errno, absl::StrCat(what, " ", path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat(what, " ", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is ", KindOf(st.st_mode),
                                                   ", not a regular file: give a file"));
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  if (bytes != nullptr) *bytes = static_cast<uint64_t>(st.st_size);
  return fd;
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                            const std::string& what) {
  uint64_t size = 0;
  DDPIO_ASSIGN_OR_RETURN(Fd fd, OpenRegularFile(path, what, &size));
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is ", size, " bytes; a ",
                                                   what, " is at most ", max_bytes,
                                                   ": this is not one"));
  }
  std::string text(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, absl::StrCat("reading ", what, " ", path));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  char extra;
  if (got != text.size() || ::read(fd.get(), &extra, 1) > 0) {
    return absl::DataLossError(absl::StrCat(what, " ", path, " changed size while it was read (",
                                            size, " bytes at the start)"));
  }
  return text;
}

}  // namespace ddpio
