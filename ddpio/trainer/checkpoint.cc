#include "ddpio/trainer/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::trainer {
namespace {

constexpr char kMagic[] = "DDPIOCK2";

uint64_t Fnv(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

absl::Status WriteAllFd(int fd, const std::string& bytes, const std::string& path) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, absl::StrCat("writing ", path));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointPath(const std::string& dir) { return dir + "/checkpoint.bin"; }

absl::Status WriteCheckpoint(const std::string& dir, const Checkpoint& c) {
  std::string bytes(kMagic, 8);
  Put(&bytes, c.epoch);
  Put(&bytes, c.position);
  Put(&bytes, c.step);
  Put(&bytes, c.sampler_seed);
  Put(&bytes, c.augment_seed);
  Put(&bytes, c.dataset_size);
  Put(&bytes, static_cast<uint8_t>(c.momentum_started));
  Put(&bytes, static_cast<uint64_t>(c.params.size()));
  bytes.append(reinterpret_cast<const char*>(c.params.data()), c.params.size() * sizeof(float));
  bytes.append(reinterpret_cast<const char*>(c.momentum.data()), c.momentum.size() * sizeof(float));
  Put(&bytes, Fnv(bytes));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("creating checkpoint directory ", dir));
  const std::string tmp = dir + "/checkpoint.bin.tmp", path = CheckpointPath(dir);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
  absl::Status st = WriteAllFd(fd, bytes, tmp);
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoToStatus(errno, absl::StrCat("fsync of ", tmp));
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoToStatus(errno, absl::StrCat("renaming to ", path));
  if (!st.ok()) {
    ::unlink(tmp.c_str());  // the previous checkpoint stays as it was
    return st;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself is durable
    ::close(dfd);
  }
  return absl::OkStatus();
}

void RemoveStaleCheckpointTemp(const std::string& dir) {
  const std::string tmp = dir + "/checkpoint.bin.tmp";
  if (::unlink(tmp.c_str()) == 0) DDPIO_LOG(INFO) << "removed " << tmp << ", left by a checkpoint write that was killed";
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& dir) {
  const std::string path = CheckpointPath(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  const auto bad = [&](const std::string& why) { return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", why)); };
  constexpr size_t kFixed = 8 + 8 + 8 + 8 + 8 + 8 + 8 + 1 + 8;
  if (bytes.size() < kFixed + 8 || std::memcmp(bytes.data(), kMagic, 8) != 0) return bad("not a ddpio checkpoint");
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (Fnv(bytes.substr(0, bytes.size() - 8)) != sum) return bad("checksum mismatch (truncated or damaged)");
  Checkpoint c;
  size_t at = 8;
  auto get = [&](auto* v) {
    std::memcpy(v, bytes.data() + at, sizeof(*v));
    at += sizeof(*v);
  };
  uint8_t started = 0;
  uint64_t n = 0;
  get(&c.epoch);
  get(&c.position);
  get(&c.step);
  get(&c.sampler_seed);
  get(&c.augment_seed);
  get(&c.dataset_size);
  get(&started);
  get(&n);
  c.momentum_started = started != 0;
  if (n > (bytes.size() - kFixed - 8) / (2 * sizeof(float)) || kFixed + 2 * n * sizeof(float) + 8 != bytes.size()) {
    return bad(absl::StrCat(n, " parameters do not fit its ", bytes.size(), " bytes"));
  }
  c.params.resize(n);
  c.momentum.resize(n);
  std::memcpy(c.params.data(), bytes.data() + at, n * sizeof(float));
  std::memcpy(c.momentum.data(), bytes.data() + at + n * sizeof(float), n * sizeof(float));
  return c;
}

}  // namespace ddpio::trainer
