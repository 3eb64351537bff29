#include "ddpio/storage/remote/record_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"

namespace ddpio::storage::remote {
namespace {

namespace fs = std::filesystem;

// A record file is at most this large (records are below 4 GiB; the cache holds ordinary ones).
constexpr uint64_t kMaxCachedRecord = uint64_t{1} << 31;

// A record's <xx> folder ("0b", lower-case hex of index % 256), file name (its index in
// decimal) and both as "0b/11", without allocating: Get is on the hit path.
struct RecordName {
  explicit RecordName(uint64_t index) {
    constexpr char kHex[] = "0123456789abcdef";
    bucket[0] = path[0] = kHex[(index >> 4) % 16];
    bucket[1] = path[1] = kHex[index % 16];
    bucket[2] = '\0';
    path[2] = '/';
    *std::to_chars(file, file + sizeof(file) - 1, index).ptr = '\0';
    std::memcpy(path + 3, file, sizeof(file));
  }
  char bucket[3];
  char file[21];
  char path[3 + sizeof(file)];
};

// The <xx> folder `bucket` of the dataset folder, open as a path only (enough for the *at calls,
// and cheaper), never through a link: invalid, errno set, when missing or not a real folder
// (a link gives ENOTDIR or ELOOP).
Fd OpenBucket(int folder, const char* bucket) {
  return Fd(::openat(folder, bucket, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// Whether openat2 (Linux 5.6) may be used; cleared the first time the kernel or a seccomp filter
// refuses the call itself.
std::atomic<bool> openat2_works{true};

// The record file under `folder`, open for reading without blocking (a FIFO opens at once
// instead of waiting for a writer), never through a link: in one openat2 call where the kernel
// has it (RESOLVE_NO_SYMLINKS: no link anywhere on "xx/index"; with neither ".." nor a leading
// '/' in it, that keeps it inside `folder`), else the <xx> folder then the file, each with
// O_NOFOLLOW. Invalid with errno set on failure (ELOOP, ENOTDIR: a link or a file in the way).
Fd OpenRecord(int folder, const RecordName& name) {
  constexpr int kFlags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
  if (openat2_works.load(std::memory_order_relaxed)) {
    open_how how{};
    how.flags = kFlags;
    how.resolve = RESOLVE_NO_SYMLINKS;
    const long fd = ::syscall(SYS_openat2, folder, name.path, &how, sizeof(how));
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return Fd(static_cast<int>(fd));
    openat2_works.store(false, std::memory_order_relaxed);
  }
  const Fd bucket = OpenBucket(folder, name.bucket);
  if (!bucket.valid()) return Fd();
  return Fd(::openat(bucket.get(), name.file, kFlags));
}

// As OpenBucket, making the folder if missing; a link or a file in its place is removed (the
// entry itself, never what a link points at) and a folder made instead. ENOENT when the dataset
// folder itself was deleted.
Fd MakeBucket(int folder, const char* bucket) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    Fd fd = OpenBucket(folder, bucket);
    if (fd.valid()) return fd;
    if (errno == ENOENT) {
      if (::mkdirat(folder, bucket, 0755) != 0 && errno != EEXIST) return Fd();
    } else if (errno == ELOOP || errno == ENOTDIR) {
      if (::unlinkat(folder, bucket, 0) != 0) return Fd();  // never removes a folder
    } else {
      return Fd();
    }
  }
  return OpenBucket(folder, bucket);
}

// Removes the entry `name` of `bucket` (never a folder, never what a link points at) if it is
// still the file `seen`, or with `seen` null if it is not a regular file: not a record another
// process renamed into place meanwhile.
void RemoveEntry(int bucket, const char* name, const struct stat* seen) {
  struct stat now;
  if (::fstatat(bucket, name, &now, AT_SYMLINK_NOFOLLOW) != 0) return;
  const bool same = seen != nullptr ? now.st_ino == seen->st_ino && now.st_dev == seen->st_dev
                                    : !S_ISREG(now.st_mode);
  if (same) ::unlinkat(bucket, name, 0);
}

// Writes `bytes` to a new file `name` in `bucket`. O_EXCL|O_NOFOLLOW: a link planted at the
// (guessable) temporary name is removed, not followed. False with errno set on failure.
bool WriteNewFile(int bucket, const char* name, std::string_view bytes) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  Fd fd(::openat(bucket, name, kFlags, 0644));
  if (!fd.valid() && errno == EEXIST) {  // left by a crashed writer with our pid, or planted
    ::unlinkat(bucket, name, 0);
    fd.reset(::openat(bucket, name, kFlags, 0644));
  }
  if (!fd.valid()) return false;
  for (size_t put = 0; put < bytes.size();) {
    const ssize_t n = ::write(fd.get(), bytes.data() + put, bytes.size() - put);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n == 0 ? ENOSPC : errno;
      fd.reset();
      errno = e;  // for the warning, whatever close() did to it
      return false;
    }
    put += static_cast<size_t>(n);
  }
  return ::close(fd.release()) == 0;
}

// DIR/<dataset>, made if missing, open without following a link in its place. DIR itself may be
// a link: the user chose it.
absl::StatusOr<Fd> OpenFolder(const std::string& dir, const std::string& dataset) {
  const std::string folder = absl::StrCat(dir, "/", dataset);
  std::error_code ec;
  fs::create_directories(dir, ec);
  Fd parent(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent.valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache folder ", dir, " cannot be used: ", ec ? ec.message() : std::strerror(errno)));
  }
  if (::mkdirat(parent.get(), dataset.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(absl::StrCat("cache folder ", dir,
                                                   " cannot be used: cannot create ", folder, " (",
                                                   std::strerror(errno), ")"));
  }
  Fd fd(::openat(parent.get(), dataset.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    const int e = errno;
    struct stat st;
    if (::fstatat(parent.get(), dataset.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cache folder ", folder,
          " is a symbolic link; the cache keeps records only in a real folder: remove the link"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cache folder ", folder, " cannot be used: ", std::strerror(e)));
  }
  if (::faccessat(fd.get(), ".", W_OK | X_OK, 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache folder ", folder, " is not writable: ", std::strerror(errno)));
  }
  return fd;
}

using DirHandle = std::unique_ptr<DIR, int (*)(DIR*)>;

// The folder `name` under `parent`, open for listing, never through a link; null when not a
// real folder.
DirHandle ListFolder(int parent, const char* name) {
  Fd fd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  DIR* d = fd.valid() ? ::fdopendir(fd.get()) : nullptr;
  if (d != nullptr) fd.release();
  return DirHandle(d, &::closedir);
}

struct Found {
  std::pair<int64_t, int64_t> when;  // last written, seconds and nanoseconds
  uint64_t index, bytes;
};

// The record files in the dataset folder: regular files named by their index in the <xx> folder
// that index belongs to, no larger than `max_bytes`. Links (to folders or files), special files,
// misplaced and oversized files are not counted (nor ever evicted: Get erases one in a record's
// way).
std::vector<Found> FindRecords(int folder, uint64_t max_bytes) {
  std::vector<Found> found;
  DirHandle top = ListFolder(folder, ".");
  if (top == nullptr) return found;
  while (const dirent* b = ::readdir(top.get())) {
    if (std::strlen(b->d_name) != 2 || !std::isxdigit(static_cast<unsigned char>(b->d_name[0])) ||
        !std::isxdigit(static_cast<unsigned char>(b->d_name[1]))) {
      continue;
    }
    DirHandle bucket = ListFolder(::dirfd(top.get()), b->d_name);
    if (bucket == nullptr) continue;
    while (const dirent* f = ::readdir(bucket.get())) {
      uint64_t index = 0;
      const char* end = f->d_name + std::strlen(f->d_name);
      const auto [ptr, err] = std::from_chars(f->d_name, end, index);
      if (err != std::errc() || ptr != end || std::strcmp(RecordName(index).file, f->d_name) != 0 ||
          std::strcmp(RecordName(index).bucket, b->d_name) != 0) {
        continue;
      }
      struct stat st;
      if (::fstatat(::dirfd(bucket.get()), f->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > max_bytes) {
        continue;
      }
      found.push_back(
          {{st.st_mtim.tv_sec, st.st_mtim.tv_nsec}, index, static_cast<uint64_t>(st.st_size)});
    }
  }
  return found;
}

}  // namespace

RecordCache::RecordCache(std::string dir, std::string dataset, uint64_t budget, Fd folder_fd)
    : dir_(std::move(dir)),
      dataset_(std::move(dataset)),
      folder_(absl::StrCat(dir_, "/", dataset_)),
      budget_(budget),
      folder_fd_(std::make_shared<const Fd>(std::move(folder_fd))) {}

absl::StatusOr<std::unique_ptr<RecordCache>> RecordCache::Open(const std::string& dir,
                                                               const std::string& dataset,
                                                               uint64_t budget_bytes) {
  bool plain = !dataset.empty();
  for (char c : dataset) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '-');
  if (!plain) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache: dataset name \"", dataset, "\" is not letters and digits"));
  }
  absl::StatusOr<Fd> fd = OpenFolder(dir, dataset);
  if (!fd.ok()) return fd.status();
  std::vector<Found> found =
      FindRecords(fd->get(), std::min<uint64_t>(budget_bytes, kMaxCachedRecord));
  auto cache =
      std::unique_ptr<RecordCache>(new RecordCache(dir, dataset, budget_bytes, *std::move(fd)));
  // What is there already, oldest first: it goes first when the budget is reached.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.when < b.when; });
  // The claims file: a regular file, never through a link (one planted is left alone and claims
  // are off: everyone fetches).
  Fd claims(::openat(cache->folder_fd_->get(), "claims",
                     O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
  struct stat st;
  if (claims.valid() && ::fstat(claims.get(), &st) == 0 && S_ISREG(st.st_mode)) {
    cache->claims_ = std::move(claims);
  }
  std::lock_guard<std::mutex> lock(cache->mu_);
  for (const Found& f : found) {
    cache->order_.push_back(f.index);
    cache->sizes_[f.index] = f.bytes;
    cache->bytes_ += f.bytes;
  }
  cache->EvictLocked();
  return cache;
}

std::shared_ptr<const Fd> RecordCache::FolderFd() const {
  std::lock_guard<std::mutex> lock(mu_);
  return folder_fd_;
}

std::optional<std::string> RecordCache::Get(uint64_t index, uint64_t expected_bytes) const {
  return Read(index, expected_bytes);
}

std::optional<std::string> RecordCache::Read(uint64_t index,
                                             std::optional<uint64_t> expected_bytes) const {
  if (expected_bytes.value_or(0) > kMaxCachedRecord) return std::nullopt;  // never cached
  const RecordName name(index);
  const std::shared_ptr<const Fd> folder = FolderFd();
  const Fd fd = OpenRecord(folder->get(), name);
  struct stat st;
  if (fd.valid()) {
    if (::fstat(fd.get(), &st) != 0) return std::nullopt;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (S_ISREG(st.st_mode) &&
        (expected_bytes.has_value() ? size == *expected_bytes : size <= kMaxCachedRecord)) {
      // Exactly the size seen: a file that grew meanwhile is read no further.
      std::string bytes(static_cast<size_t>(size), '\0');
      size_t got = 0;
      while (got < bytes.size()) {
        const ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      if (got == bytes.size()) return bytes;
      return std::nullopt;
    }
    if (S_ISDIR(st.st_mode)) return std::nullopt;  // not ours to remove
  } else if (errno != ELOOP && errno != ENXIO) {
    return std::nullopt;  // absent (or a <xx> folder that is a file: Put replaces it)
  }
  // Something else in the record's place: a file of another size, a FIFO, a device, a link (to
  // the record or to its <xx> folder: ELOOP), a socket (ENXIO). Removed when it is in a real
  // <xx> folder, so that Put can cache the record there.
  const Fd bucket = OpenBucket(folder->get(), name.bucket);
  if (bucket.valid()) RemoveEntry(bucket.get(), name.file, fd.valid() ? &st : nullptr);
  std::lock_guard<std::mutex> lock(mu_);
  ForgetLocked(index);
  return std::nullopt;
}

void RecordCache::Put(uint64_t index, std::string_view bytes) {
  if (bytes.size() > budget_ || bytes.size() > kMaxCachedRecord) return;
  const RecordName name(index);
  const std::string tmp = absl::StrCat(name.file, ".tmp-", ::getpid(), "-",
                                       std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::shared_ptr<const Fd> folder = FolderFd();
  Fd bucket = MakeBucket(folder->get(), name.bucket);
  std::string why;
  if (!bucket.valid() && errno == ENOENT) {
    // The dataset folder was deleted under us (rm -r): make it again, refusing a link.
    absl::StatusOr<Fd> fresh = OpenFolder(dir_, dataset_);
    if (fresh.ok()) {
      folder = std::make_shared<const Fd>(*std::move(fresh));
      {
        std::lock_guard<std::mutex> lock(mu_);
        folder_fd_ = folder;
      }
      bucket = MakeBucket(folder->get(), name.bucket);
    } else {
      why = std::string(fresh.status().message());
    }
  }
  bool ok = bucket.valid() && WriteNewFile(bucket.get(), tmp.c_str(), bytes) &&
            ::renameat(bucket.get(), tmp.c_str(), bucket.get(), name.file) == 0;
  if (!ok) {
    if (why.empty()) {
      why = absl::StrCat("cannot write ", folder_, "/", name.bucket, "/", name.file, " (",
                         std::strerror(errno), ")");
    }
    if (bucket.valid()) ::unlinkat(bucket.get(), tmp.c_str(), 0);
    std::lock_guard<std::mutex> lock(mu_);
    if (!warned_) {
      warned_ = true;
      DDPIO_LOG(WARNING) << "cache folder " << folder_ << ": " << why
                         << "; records that do not fit are read from the store";
    }
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = sizes_.try_emplace(index, bytes.size());
  if (added) {
    order_.push_back(index);
  } else {
    bytes_ -= it->second;
    it->second = bytes.size();
  }
  bytes_ += bytes.size();
  EvictLocked();
}

bool RecordCache::Contains(uint64_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return sizes_.count(index) != 0;
}

void RecordCache::Erase(uint64_t index) {
  const RecordName name(index);
  // A <xx> folder that is a link is not ours: nothing of ours to delete there.
  const Fd bucket = OpenBucket(FolderFd()->get(), name.bucket);
  if (bucket.valid()) ::unlinkat(bucket.get(), name.file, 0);
  std::lock_guard<std::mutex> lock(mu_);
  ForgetLocked(index);
}

void RecordCache::ForgetLocked(uint64_t index) const {
  auto it = sizes_.find(index);
  if (it != sizes_.end()) {
    bytes_ -= it->second;
    sizes_.erase(it);
  }
}

void RecordCache::EvictLocked() {
  while (bytes_ > budget_ && !order_.empty()) {
    const uint64_t index = order_.front();
    order_.pop_front();
    if (sizes_.count(index) == 0) continue;  // erased already
    const RecordName name(index);
    const Fd bucket = OpenBucket(folder_fd_->get(), name.bucket);
    if (bucket.valid()) ::unlinkat(bucket.get(), name.file, 0);
    ForgetLocked(index);
  }
}

bool RecordCache::Holds(uint64_t index, uint64_t bytes) const {
  const RecordName name(index);
  struct stat st;
  return ::fstatat(FolderFd()->get(), name.path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == bytes;
}

namespace {

// Locks (F_WRLCK) or unlocks (F_UNLCK) byte `key` of `fd` for its open file description, without
// waiting. Whether it was done.
bool LockByte(int fd, uint64_t key, short type) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = static_cast<off_t>(key & ((uint64_t{1} << 62) - 1));
  l.l_len = 1;
  return ::fcntl(fd, F_OFD_SETLK, &l) == 0;
}

}  // namespace

RecordCache::Claim& RecordCache::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    Release();
    cache_ = std::exchange(other.cache_, nullptr);
    key_ = other.key_;
  }
  return *this;
}

void RecordCache::Claim::Release() {
  if (cache_ != nullptr) std::exchange(cache_, nullptr)->Unclaim(key_);
}

std::optional<RecordCache::Claim> RecordCache::TryClaim(uint64_t key) const {
  Claim claim;
  if (!claims_.valid()) return claim;  // no locking here: go ahead
  std::lock_guard<std::mutex> lock(mu_);
  if (claimed_.count(key) != 0) return std::nullopt;  // held by this process
  if (!LockByte(claims_.get(), key, F_WRLCK)) {
    if (errno == EAGAIN || errno == EACCES) return std::nullopt;  // held by another
    locks_fail_.store(true, std::memory_order_relaxed);
    return claim;  // the filesystem cannot lock: go ahead
  }
  claimed_.insert(key);
  claim.cache_ = this;
  claim.key_ = key;
  return claim;
}

RecordCache::Claim RecordCache::WaitClaim(uint64_t key, std::chrono::milliseconds patience) const {
  // The holder is fetching a chunk (a GET of a few MB, its retries): polled, not blocked on, so
  // that a holder that is stuck (not dead: a dead one's lock goes at once) is waited for only so
  // long.
  const auto deadline = std::chrono::steady_clock::now() + patience;
  auto pause = std::chrono::microseconds(500);
  while (true) {
    if (std::optional<Claim> claim = TryClaim(key)) return *std::move(claim);
    if (std::chrono::steady_clock::now() >= deadline) return Claim();
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(16));
  }
}

bool RecordCache::ClaimedHere(uint64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return claimed_.count(key) != 0;
}

void RecordCache::Unclaim(uint64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  LockByte(claims_.get(), key, F_UNLCK);
  claimed_.erase(key);
}

uint64_t RecordCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace ddpio::storage::remote
