#include "ddpio/comm/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {

std::vector<std::string> PrefixStore::Prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefix_ + k);
  return out;
}

absl::Status PrefixStore::Set(const std::string& key, const std::string& value) {
  return base_->Set(prefix_ + key, value);
}
absl::StatusOr<std::string> PrefixStore::Get(const std::string& key,
                                             std::chrono::milliseconds timeout) {
  return base_->Get(prefix_ + key, timeout);
}
absl::Status PrefixStore::Wait(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  return base_->Wait(Prefixed(keys), timeout);
}
absl::StatusOr<int64_t> PrefixStore::Add(const std::string& key, int64_t delta) {
  return base_->Add(prefix_ + key, delta);
}
absl::StatusOr<bool> PrefixStore::Check(const std::vector<std::string>& keys) {
  return base_->Check(Prefixed(keys));
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("file store directory ", dir));
  return std::unique_ptr<FileStore>(new FileStore(dir));
}

std::string FileStore::PathOf(const std::string& key) const {
  // Keys may contain '/' (prefixes): escape everything but [A-Za-z0-9._-].
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      name += static_cast<char>(c);
    } else {
      absl::StrAppend(&name, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return dir_ + "/" + name;
}

absl::Status FileStore::Set(const std::string& key, const std::string& value) {
  const std::string path = PathOf(key);
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".",
                                       std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << value;
    f.close();
    if (!f) return ErrnoToStatus(errno, absl::StrCat("file store: writing ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("file store: renaming ", tmp));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> FileStore::Check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    if (::access(PathOf(k).c_str(), F_OK) != 0) return false;
  }
  return true;
}

absl::Status FileStore::Wait(const std::vector<std::string>& keys,
                             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::string missing;
    for (const auto& k : keys) {
      if (::access(PathOf(k).c_str(), F_OK) != 0) {
        missing = k;
        break;
      }
    }
    if (missing.empty()) return absl::OkStatus();
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("file store ", dir_, ": key '", missing,
                                                      "' not set within ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(pause);  // polling a shared filesystem: back off to 50 ms
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

absl::StatusOr<std::string> FileStore::Get(const std::string& key,
                                           std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(Wait({key}, timeout));
  std::ifstream f(PathOf(key), std::ios::binary);
  if (!f) return ErrnoToStatus(errno, absl::StrCat("file store: reading key '", key, "'"));
  return std::string(std::istreambuf_iterator<char>(f), {});
}

absl::StatusOr<int64_t> FileStore::Add(const std::string& key, int64_t delta) {
  const std::string lock_path = PathOf(key) + ".lock";
  int fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("file store: ", lock_path));
  if (::flock(fd, LOCK_EX) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoToStatus(err, absl::StrCat("file store: locking ", lock_path));
  }
  int64_t value = 0;
  std::ifstream in(PathOf(key));
  if (in) {
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::from_chars(text.data(), text.data() + text.size(), value);
  }
  absl::Status st = __builtin_add_overflow(value, delta, &value)
                        ? absl::OutOfRangeError(absl::StrCat("file store: adding ", delta, " to '",
                                                             key, "' overflows the 64-bit counter"))
                        : Set(key, std::to_string(value));
  ::flock(fd, LOCK_UN);
  ::close(fd);
  if (!st.ok()) return st;
  return value;
}

}  // namespace ddpio::comm
