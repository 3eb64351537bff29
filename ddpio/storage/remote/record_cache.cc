#include "ddpio/storage/remote/record_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"

namespace ddpio::storage::remote {
namespace {

namespace fs = std::filesystem;

// A record file is at most this large (records are below 4 GiB; the cache holds ordinary ones).
constexpr uint64_t kMaxCachedRecord = uint64_t{1} << 31;

}  // namespace

absl::StatusOr<std::unique_ptr<RecordCache>> RecordCache::Open(const std::string& dir,
                                                               const std::string& dataset,
                                                               uint64_t budget_bytes) {
  for (char c : dataset) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) {
      return absl::InvalidArgumentError(
          absl::StrCat("cache: dataset name \"", dataset, "\" is not letters and digits"));
    }
  }
  const std::string folder = absl::StrCat(dir, "/", dataset);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec || !fs::is_directory(folder, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache folder ", dir, " cannot be used: cannot create ", folder,
                     ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache folder ", folder, " is not writable: ", std::strerror(errno)));
  }
  auto cache = std::unique_ptr<RecordCache>(new RecordCache(folder, budget_bytes));
  // What is there already, oldest first: it goes first when the budget is reached.
  struct Found {
    fs::file_time_type when;
    uint64_t index, bytes;
  };
  std::vector<Found> found;
  for (auto it = fs::recursive_directory_iterator(folder, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    uint64_t index = 0;
    if (!it->is_regular_file(ec) || !absl::SimpleAtoi(it->path().filename().string(), &index))
      continue;
    const auto bytes = it->file_size(ec);
    if (ec) continue;
    found.push_back({it->last_write_time(ec), index, bytes});
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.when < b.when; });
  for (const Found& f : found) {
    cache->order_.push_back(f.index);
    cache->sizes_[f.index] = f.bytes;
    cache->bytes_ += f.bytes;
  }
  std::lock_guard<std::mutex> lock(cache->mu_);
  cache->EvictLocked();
  return cache;
}

std::string RecordCache::PathOf(uint64_t index) const {
  return absl::StrCat(folder_, "/", absl::Hex(index % 256, absl::kZeroPad2), "/", index);
}

std::optional<std::string> RecordCache::Get(uint64_t index) const {
  const int fd = ::open(PathOf(index).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) <= kMaxCachedRecord) {
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got == bytes.size()) out = std::move(bytes);
  }
  ::close(fd);
  return out;
}

void RecordCache::Put(uint64_t index, std::string_view bytes) {
  if (bytes.size() > budget_ || bytes.size() > kMaxCachedRecord) return;
  const std::string path = PathOf(index);
  const std::string tmp = absl::StrCat(path, ".tmp-", ::getpid(), "-",
                                       std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  for (size_t put = 0; ok && put < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + put, bytes.size() - put);
    ok = n > 0;
    if (ok) put += static_cast<size_t>(n);
  }
  const int saved = errno;
  if (fd >= 0) ok = (::close(fd) == 0) && ok;
  if (ok) ok = ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    ::unlink(tmp.c_str());
    std::lock_guard<std::mutex> lock(mu_);
    if (!warned_) {
      warned_ = true;
      DDPIO_LOG(WARNING) << "cache folder " << folder_ << ": cannot write " << path << " ("
                         << std::strerror(saved)
                         << "); records that do not fit are read from the store";
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
  ::unlink(PathOf(index).c_str());
  std::lock_guard<std::mutex> lock(mu_);
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
    auto it = sizes_.find(index);
    if (it == sizes_.end()) continue;  // erased already
    ::unlink(PathOf(index).c_str());
    bytes_ -= it->second;
    sizes_.erase(it);
  }
}

uint64_t RecordCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace ddpio::storage::remote
