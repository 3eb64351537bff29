#include "ddpio/storage/store_settings.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::storage {
namespace {

// What each variable sets, in the field's unit: nullopt when it is unset or empty;
// InvalidArgument naming the variable and its value when it does not parse or is out of range.

absl::StatusOr<std::optional<std::string>> CacheDirFrom(const Environment& env) {
  const std::string dir = EnvValue(env, "DDPIO_S3_CACHE_DIR");
  if (dir.empty()) return std::nullopt;
  return dir;
}

absl::StatusOr<std::optional<uint64_t>> CacheBytesFrom(const Environment& env) {
  const std::string gib = EnvValue(env, "DDPIO_S3_CACHE_GB");
  if (gib.empty()) return std::nullopt;
  double v = 0;
  if (!absl::SimpleAtod(gib, &v) || !(v > 0) || v > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("DDPIO_S3_CACHE_GB=", gib, " is not a size in GiB (> 0)"));
  }
  return static_cast<uint64_t>(v * (1 << 30));
}

absl::StatusOr<std::optional<uint64_t>> CoalesceGapFrom(const Environment& env) {
  const std::string kib = EnvValue(env, "DDPIO_S3_COALESCE_KB");
  if (kib.empty()) return std::nullopt;
  uint64_t v = 0;
  if (!absl::SimpleAtoi(kib, &v) || v > (uint64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DDPIO_S3_COALESCE_KB=", kib, " is not a size in KiB"));
  }
  return v << 10;
}

absl::StatusOr<std::optional<uint64_t>> MemoryBytesFrom(const Environment& env) {
  const std::string mib = EnvValue(env, "DDPIO_S3_MEMORY_MB");
  if (mib.empty()) return std::nullopt;
  uint64_t v = 0;
  if (!absl::SimpleAtoi(mib, &v) || v < 1 || v > (uint64_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("DDPIO_S3_MEMORY_MB=", mib,
                     " is not a size in MiB (1 or more): the fetched records "
                     "a process holds in memory"));
  }
  return v << 20;
}

absl::StatusOr<std::optional<std::chrono::milliseconds>> GiveUpAfterFrom(const Environment& env) {
  const std::string s = EnvValue(env, "DDPIO_S3_OUTAGE_SECONDS");
  if (s.empty()) return std::nullopt;
  double v = 0;
  if (!absl::SimpleAtod(s, &v) || !(v > 0) || v > 7 * 86400) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DDPIO_S3_OUTAGE_SECONDS=", s,
        " is not a number of seconds (> 0, at most a week): how long reads retry a failing "
        "object store before the job fails"));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(v * 1000));
}

absl::StatusOr<std::optional<int>> InFlightLimitFrom(const Environment& env) {
  const std::string s = EnvValue(env, "DDPIO_S3_MAX_IN_FLIGHT");
  if (s.empty()) return std::nullopt;
  int v = 0;
  if (!absl::SimpleAtoi(s, &v) || v < 1 || v > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DDPIO_S3_MAX_IN_FLIGHT=", s,
        " is not a number of GETs from 1 to 256: the most a reader keeps in flight (a connection "
        "each)"));
  }
  return v;
}

absl::StatusOr<std::optional<bool>> WholeChunksFrom(const Environment& env) {
  const std::string v = EnvValue(env, "DDPIO_S3_WHOLE_CHUNKS");
  if (v.empty()) return std::nullopt;
  if (v == "1") return true;
  if (v == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "DDPIO_S3_WHOLE_CHUNKS=", v,
      " is not 0 or 1: whether a dataset that fits the cache is fetched a whole chunk at a time"));
}

// *field = the variable's value (read by `from`) if it is set and no explicit value replaces it;
// else *field keeps what it has.
template <typename T, typename From>
absl::Status FromEnvironment(const std::optional<T>& explicit_value, From from,
                             const Environment& env, T* field) {
  if (explicit_value.has_value()) return absl::OkStatus();  // not read: the caller's value wins
  DDPIO_ASSIGN_OR_RETURN(std::optional<T> value, from(env));
  if (value.has_value()) *field = *std::move(value);
  return absl::OkStatus();
}

}  // namespace

void ApplyStoreOverrides(const StoreOverrides& x, StoreSettings* settings) {
  remote::RemoteOptions& ro = settings->remote;
  if (x.s3.has_value()) settings->s3 = *x.s3;
  if (x.cache_dir.has_value()) ro.cache_dir = *x.cache_dir;
  if (x.cache_bytes.has_value()) ro.cache_bytes = *x.cache_bytes;
  if (x.coalesce_gap.has_value()) ro.coalesce_gap = *x.coalesce_gap;
  if (x.memory_bytes.has_value()) ro.memory_bytes = *x.memory_bytes;
  if (x.give_up_after.has_value()) ro.retry.give_up_after = *x.give_up_after;
  if (x.in_flight_limit.has_value()) ro.in_flight_limit = *x.in_flight_limit;
  if (x.whole_chunks.has_value()) {
    ro.whole_chunks = *x.whole_chunks;
    if (*x.whole_chunks) ro.min_chunk_share = 0;  // asked for: whatever share of them is needed
  }
  if (x.chunk_order_records.has_value()) ro.chunk_order_records = *x.chunk_order_records;
  if (x.order_chunk_records.has_value()) ro.order_chunk_records = *x.order_chunk_records;
  if (x.first_batch_records.has_value()) ro.first_batch_records = *x.first_batch_records;
  if (x.max_requests_per_s.has_value()) ro.max_requests_per_s = *x.max_requests_per_s;
  if (x.chunk_share.has_value()) ro.chunk_share = *x.chunk_share;
  if (x.preloaded_index != nullptr) ro.preloaded = x.preloaded_index;
}

absl::StatusOr<StoreSettings> ResolveStoreSettings(const Environment& env,
                                                   const StoreOverrides& explicit_values) {
  const StoreOverrides& x = explicit_values;
  StoreSettings s;
  if (!x.s3.has_value()) {
    DDPIO_ASSIGN_OR_RETURN(s.s3, s3::S3ConfigFromEnvironment(env));
  }
  remote::RemoteOptions& ro = s.remote;
  DDPIO_RETURN_IF_ERROR(FromEnvironment(x.cache_dir, CacheDirFrom, env, &ro.cache_dir));
  DDPIO_RETURN_IF_ERROR(FromEnvironment(x.cache_bytes, CacheBytesFrom, env, &ro.cache_bytes));
  DDPIO_RETURN_IF_ERROR(FromEnvironment(x.coalesce_gap, CoalesceGapFrom, env, &ro.coalesce_gap));
  DDPIO_RETURN_IF_ERROR(FromEnvironment(x.memory_bytes, MemoryBytesFrom, env, &ro.memory_bytes));
  DDPIO_RETURN_IF_ERROR(
      FromEnvironment(x.give_up_after, GiveUpAfterFrom, env, &ro.retry.give_up_after));
  DDPIO_RETURN_IF_ERROR(FromEnvironment(x.whole_chunks, WholeChunksFrom, env, &ro.whole_chunks));
  DDPIO_RETURN_IF_ERROR(
      FromEnvironment(x.in_flight_limit, InFlightLimitFrom, env, &ro.in_flight_limit));
  // DDPIO_S3_WHOLE_CHUNKS=1 asks for whole chunks whatever share of them a reader needs
  // (RemoteOptions::min_chunk_share); unset, only from that share on.
  if (!x.whole_chunks.has_value() && EnvValue(env, "DDPIO_S3_WHOLE_CHUNKS") == "1") {
    ro.min_chunk_share = 0;
  }
  ApplyStoreOverrides(x, &s);
  return s;
}

}  // namespace ddpio::storage
