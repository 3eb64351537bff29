#include "ddpio/storage/remote/upload_lock.h"

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/upload_json.h"

namespace ddpio::storage::remote {
namespace {

constexpr int kTakeRounds = 4;

using internal::kMaxUploadLockBytes;
using internal::ParseUploadLockHolder;
using internal::UploadLockHolder;

std::string When(int64_t unix_seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown host";
  return name;
}

}  // namespace

std::string UploadLock::Body(int64_t now) const {
  nlohmann::json j;
  j["format"] = "ddpio-upload-lock";
  j["token"] = token_;
  j["host"] = HostName();
  j["pid"] = static_cast<int64_t>(::getpid());
  j["started"] = started_;
  j["expires"] = now + options_.lease_seconds;
  return j.dump();
}

absl::StatusOr<std::unique_ptr<UploadLock>> UploadLock::Acquire(s3::ObjectStore& s3,
                                                                const s3::S3Url& dest,
                                                                const std::string& token,
                                                                UploadLockOptions options) {
  if (!options.now) options.now = [] { return absl::ToUnixSeconds(absl::Now()); };
  auto lock = std::unique_ptr<UploadLock>(new UploadLock(s3, dest, token, std::move(options)));
  const std::string key = lock->Key();
  const std::string name = s3::ObjectStore::Name(dest.bucket, key);
  const int64_t now = lock->options_.now();
  lock->started_ = now;
  for (int round = 0; round < kTakeRounds; ++round) {
    absl::StatusOr<std::string> put = s3.PutConditional(dest.bucket, key, lock->Body(now));
    if (!put.ok() && !absl::IsFailedPrecondition(put.status())) return put.status();
    if (!put.ok()) {  // there already: whose, and is it still held?
      absl::StatusOr<s3::ObjectStore::Object> held =
          s3.GetObject(dest.bucket, key, kMaxUploadLockBytes);
      if (absl::IsNotFound(held.status())) continue;  // released meanwhile
      if (!held.ok()) return held.status();
      const std::optional<UploadLockHolder> holder = ParseUploadLockHolder(held->body);
      if (!holder.has_value()) {
        return absl::FailedPreconditionError(
            absl::StrCat(name, " is not a ddpio upload lock; if no upload to ", dest.ToString(),
                         " is running, delete it and run again"));
      }
      const bool mine = holder->token == token;
      if (!mine && holder->expires >= now) {
        return absl::FailedPreconditionError(
            absl::StrCat("another upload is writing to ", dest.ToString(), " (", holder->host,
                         ", process ", holder->pid, ", since ", When(holder->started),
                         "; its lock holds until ", When(holder->expires),
                         "): wait for it to finish; if it died, run again after that time"));
      }
      if (mine) lock->started_ = holder->started;
      // Ours from an earlier run, or run out: take it over, only if nobody did meanwhile.
      put = s3.PutConditional(dest.bucket, key, lock->Body(now), held->etag);
      if (absl::IsFailedPrecondition(put.status())) continue;
      if (!put.ok()) return put.status();
    }
    lock->etag_ = *put;
    lock->renewed_ = now;
    DDPIO_RETURN_IF_ERROR(lock->Check());
    return lock;
  }
  return absl::AbortedError(absl::StrCat("the upload lock ", name, " changed hands ", kTakeRounds,
                                         " times while this upload tried to take it; run again"));
}

absl::Status UploadLock::Check() {
  const std::string name = s3::ObjectStore::Name(dest_.bucket, Key());
  absl::StatusOr<s3::ObjectStore::Object> held =
      s3_.GetObject(dest_.bucket, Key(), kMaxUploadLockBytes);
  if (absl::IsNotFound(held.status())) {
    return absl::AbortedError(absl::StrCat(
        "the upload lock ", name, " was removed while this upload held it: another writer at ",
        dest_.ToString(), "? This upload stops; run it again"));
  }
  if (!held.ok()) return held.status();
  const std::optional<UploadLockHolder> holder = ParseUploadLockHolder(held->body);
  if (!holder.has_value() || holder->token != token_) {
    return absl::AbortedError(absl::StrCat(
        "another upload took the lock of ", dest_.ToString(),
        holder.has_value() ? absl::StrCat(" (", holder->host, ", process ", holder->pid, ")") : "",
        " while this one held it (a store that ignores conditional writes, or this upload "
        "stalled past its lease); this upload stops without publishing anything: run it again "
        "when the other has finished"));
  }
  return absl::OkStatus();
}

absl::Status UploadLock::Renew(bool force) {
  const int64_t now = options_.now();
  if (!force && now - renewed_ < options_.lease_seconds / 3) return absl::OkStatus();
  absl::StatusOr<std::string> put = s3_.PutConditional(dest_.bucket, Key(), Body(now), etag_);
  if (absl::IsFailedPrecondition(put.status())) return Check();  // names who has it now
  if (!put.ok()) return put.status();
  etag_ = *put;
  renewed_ = now;
  return absl::OkStatus();
}

void UploadLock::Release() { (void)s3_.Delete(dest_.bucket, Key()); }

}  // namespace ddpio::storage::remote
