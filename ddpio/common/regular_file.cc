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

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
  absl::Status st = absl::OkStatus();
  for (size_t done = 0; st.ok() && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
    } else {
      done += static_cast<size_t>(n);
    }
  }
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoToStatus(errno, absl::StrCat("fsync of ", tmp));
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = ErrnoToStatus(errno, absl::StrCat("renaming to ", path));
  if (!st.ok()) {
    ::unlink(tmp.c_str());  // the previous file stays as it was
    return st;
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself is durable
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace ddpio
