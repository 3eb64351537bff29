#include "ddpio/trainer/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/log.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::trainer {
namespace {

constexpr char kMagic[] = "DDPIOCK4";
constexpr char kMagicV3[] = "DDPIOCK3";
constexpr char kMagicV2[] = "DDPIOCK2";

// Version 2's checksum: FNV-1a's loop with a truncated offset basis.
uint64_t LegacyChecksum(std::string_view s) { return Fnv1a64(s, 1469598103934665603ull); }

}  // namespace

std::string CheckpointPath(const std::string& dir) { return dir + "/checkpoint.bin"; }

absl::Status WriteCheckpoint(const std::string& dir, const Checkpoint& c) {
  std::string bytes(kMagic, 8);
  for (uint64_t v : {c.epoch, c.position, c.step, c.sampler_seed, c.augment_seed, c.dataset_size})
    PutLe(&bytes, v);
  PutLe(&bytes, static_cast<uint8_t>(c.order));
  for (uint64_t v : {c.block_chunk, c.block_window, c.block_lanes}) PutLe(&bytes, v);
  PutLe(&bytes, static_cast<uint8_t>(c.momentum_started));
  PutLe(&bytes, static_cast<uint64_t>(c.params.size()));
  PutLeAll(&bytes, c.params);
  PutLeAll(&bytes, c.momentum);
  PutLe(&bytes, Fnv1a64(bytes));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("creating checkpoint directory ", dir));
  // checkpoint.bin.tmp, renamed over checkpoint.bin: the previous checkpoint stays on failure.
  return WriteFileAtomically(CheckpointPath(dir), bytes);
}

void RemoveStaleCheckpointTemp(const std::string& dir) {
  const std::string tmp = dir + "/checkpoint.bin.tmp";
  if (::unlink(tmp.c_str()) == 0)
    DDPIO_LOG(INFO) << "removed " << tmp << ", left by a checkpoint write that was killed";
}

namespace {
// Before the parameters: magic, six u64, (version 4: u8 order, three u64), u8, u64 count.
constexpr size_t kFixedV3 = 8 + 8 + 8 + 8 + 8 + 8 + 8 + 1 + 8;
constexpr size_t kOrderBytes = 1 + 8 + 8 + 8;
constexpr size_t kFixed = kFixedV3 + kOrderBytes;
}  // namespace

uint64_t CheckpointBytes(uint64_t params) { return kFixed + 2 * params * sizeof(float) + 8; }

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& dir, uint64_t max_params) {
  const std::string path = CheckpointPath(dir);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat("no checkpoint at ", path));
  }
  // Regular files only, no larger than the format allows for this model: a FIFO would block the
  // read forever, /dev/zero or a sparse 20 GB file would be read whole.
  const uint64_t limit = max_params > 0 ? CheckpointBytes(max_params) : kMaxCheckpointBytes;
  DDPIO_ASSIGN_OR_RETURN(const std::string bytes, ReadRegularFile(path, limit, "checkpoint"));
  const auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, ": ", why));
  };
  const auto magic_is = [&](const char* magic) {
    return bytes.size() >= 8 && std::memcmp(bytes.data(), magic, 8) == 0;
  };
  const bool v2 = magic_is(kMagicV2), v3 = magic_is(kMagicV3), v4 = magic_is(kMagic);
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), "DDPIOCK", 7) == 0 && !v2 && !v3 && !v4) {
    return bad(absl::StrCat("format version ", std::string(bytes.data() + 7, 1),
                            " (this ddpio reads 2, 3 and 4)"));
  }
  const size_t fixed = v4 ? kFixed : kFixedV3;
  if (bytes.size() < fixed + 8 || !(v2 || v3 || v4)) return bad("not a ddpio checkpoint");
  const std::string_view body(bytes.data(), bytes.size() - 8);
  const uint64_t sum = GetLe<uint64_t>(bytes.data() + bytes.size() - 8);
  if ((v2 ? LegacyChecksum(body) : Fnv1a64(body)) != sum)
    return bad("checksum mismatch (truncated or damaged)");
  Checkpoint c;
  ByteReader r(std::string_view(bytes).substr(8));
  uint8_t started = 0;
  uint64_t n = 0;
  r.Le(&c.epoch);
  r.Le(&c.position);
  r.Le(&c.step);
  r.Le(&c.sampler_seed);
  r.Le(&c.augment_seed);
  r.Le(&c.dataset_size);
  if (v4) {  // before: the exact order
    uint8_t order = 0;
    r.Le(&order);
    if (order > static_cast<uint8_t>(sampler::Order::kBlock)) {
      return bad(absl::StrCat("unknown sample order ", order));
    }
    c.order = static_cast<sampler::Order>(order);
    r.Le(&c.block_chunk);
    r.Le(&c.block_window);
    r.Le(&c.block_lanes);
  }
  r.Le(&started);
  r.Le(&n);
  c.momentum_started = started != 0;
  if (n > (bytes.size() - fixed - 8) / (2 * sizeof(float)) ||
      fixed + 2 * n * sizeof(float) + 8 != bytes.size()) {
    return bad(absl::StrCat(n, " parameters do not fit its ", bytes.size(), " bytes"));
  }
  r.LeAll(n, &c.params);
  r.LeAll(n, &c.momentum);
  return c;
}

absl::StatusOr<ParamDifference> CompareParams(const Checkpoint& a, const Checkpoint& b) {
  if (a.params.size() != b.params.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoints hold ", a.params.size(),
                                                   " and ", b.params.size(),
                                                   " parameters: not the same model"));
  }
  ParamDifference d;
  d.count = a.params.size();
  double scale = 0;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const float x = a.params[i], y = b.params[i];
    if (std::isfinite(y)) scale = std::max(scale, std::fabs(static_cast<double>(y)));
    if (std::memcmp(&x, &y, sizeof(float)) == 0) continue;
    ++d.differing;
    const double diff = std::fabs(static_cast<double>(x) - static_cast<double>(y));
    d.max_abs =
        std::max(d.max_abs, std::isfinite(diff) ? diff : std::numeric_limits<double>::infinity());
  }
  d.max_relative = d.max_abs == 0 ? 0
                   : scale > 0    ? d.max_abs / scale
                                  : std::numeric_limits<double>::infinity();
  return d;
}

}  // namespace ddpio::trainer
