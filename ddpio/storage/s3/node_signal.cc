#include "ddpio/storage/s3/node_signal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddpio::storage::s3 {

// The file's one page: the latest push-back, in steady-clock nanoseconds (0: none yet).
struct NodeSignal::Shared {
  std::atomic<int64_t> latest_ns;
};
static_assert(std::atomic<int64_t>::is_always_lock_free,
              "a lock-free atomic is address-free: it works between processes");

namespace {

constexpr size_t kFileBytes = 4096;

// Whether `fd` is the file at `path` now (not one removed since it was opened).
bool StillThere(int fd, const std::string& path) {
  struct stat open_st {
  }, path_st{};
  return ::fstat(fd, &open_st) == 0 && ::lstat(path.c_str(), &path_st) == 0 &&
         open_st.st_dev == path_st.st_dev && open_st.st_ino == path_st.st_ino;
}

// Opens the file at `path` (made when missing) holding a shared lock on it, so that no other
// client removes it while this one uses it; a file removed between the open and the lock (its
// last user closing) is let go and the new one opened. -errno on failure.
int OpenLocked(const std::string& path) {
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    int locked;
    do {
      locked = ::flock(fd, LOCK_SH);  // waits only while a last user checks and removes
    } while (locked != 0 && errno == EINTR);
    if (locked != 0) {
      const int error = errno;
      ::close(fd);
      return -error;
    }
    // Removed meanwhile: its last user held it exclusively. Not a loop without end: each round
    // needs another client to have closed the file in between; after 8 the caller goes on alone
    // (a removed file would split it from the node's other clients without saying so).
    if (StillThere(fd, path)) return fd;
    ::close(fd);
    if (attempt >= 8) return -EAGAIN;
  }
}

absl::Status Refused(const std::string& path, const std::string& why, bool remove_it = false) {
  return absl::FailedPreconditionError(
      absl::StrCat("the node's store signal ", path, ": ", why,
                   "; this process backs off from the store on its own",
                   remove_it ? " (remove it to share one again)" : ""));
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeSignal>> NodeSignal::Open(const std::string& key,
                                                             const std::string& dir) {
  const std::string path =
      absl::StrFormat("%s/ddpio-store-signal-%d-%016x", dir, static_cast<int>(::geteuid()),
                      static_cast<uint64_t>(std::hash<std::string>{}(key)));
  const int fd = OpenLocked(path);
  if (fd < 0) {
    const int error = -fd;  // ELOOP: a symlink there
    if (error == EAGAIN) return Refused(path, "removed by its last client each time it was opened");
    return Refused(path, absl::StrCat("cannot open it: ", std::strerror(error)), error == ELOOP);
  }
  struct stat st {};
  absl::Status bad;
  if (::fstat(fd, &st) != 0) {
    bad = Refused(path, absl::StrCat("cannot stat it: ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    bad = Refused(path, "not a regular file", /*remove_it=*/true);
  } else if (st.st_uid != ::geteuid()) {
    bad = Refused(path, absl::StrCat("owned by user ", st.st_uid, ", not this one"), true);
  } else if (static_cast<size_t>(st.st_size) < kFileBytes &&
             ::ftruncate(fd, static_cast<off_t>(kFileBytes)) != 0) {
    // Made by this process or another at the same time: growing it to its size twice is the same.
    bad = Refused(path, absl::StrCat("cannot size it: ", std::strerror(errno)));
  }
  if (!bad.ok()) {
    ::close(fd);
    return bad;
  }
  void* map = ::mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    return Refused(path, absl::StrCat("cannot map it: ", std::strerror(error)));
  }
  return std::unique_ptr<NodeSignal>(
      new NodeSignal(path, fd, ::getpid(), static_cast<Shared*>(map)));
}

NodeSignal::~NodeSignal() {
  ::munmap(shared_, kFileBytes);
  // The last user: no other holds the shared lock. Remove the file unless it was replaced. Not in
  // a forked child: the lock belongs to the open file it shares with its parent, so taking it
  // exclusively would succeed while the parent still uses the file.
  if (::getpid() == opener_ && ::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    if (StillThere(fd_, path_)) ::unlink(path_.c_str());
    ::flock(fd_, LOCK_UN);  // a child that inherited the descriptor keeps it open, not locked
  }
  ::close(fd_);
}

void NodeSignal::Raise(Clock::time_point now) {
  shared_->latest_ns.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(),
      std::memory_order_relaxed);
}

std::optional<NodeSignal::Clock::time_point> NodeSignal::Latest(Clock::time_point now) const {
  const int64_t ns = shared_->latest_ns.load(std::memory_order_relaxed);
  if (ns <= 0) return std::nullopt;
  const Clock::time_point at{
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns))};
  if (at > now + std::chrono::seconds(1)) return std::nullopt;  // a damaged or foreign file
  return at;
}

}  // namespace ddpio::storage::s3
