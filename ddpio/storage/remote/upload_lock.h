// UploadLock: one upload at a time per prefix. Two uploads of different datasets to one prefix
// would otherwise each write the files, the index and a manifest, and leave one's manifest over
// the other's data while both report success.
//
// The lock is the object PREFIX/ddpio-upload.lock (JSON: a token naming the upload, the host and
// process, when it started and until when it holds), created with a conditional PUT
// (If-None-Match: *) so that of two uploads only one creates it, renewed with If-Match on its own
// ETag, and deleted when the upload ends. A lock whose lease ran out (its upload died) is taken
// over with If-Match on the dead one's ETag, so two uploads cannot both take it over. The same
// upload run again (its token kept in its resume state) takes its own lock back at once.
//
// A store that ignores conditional headers grants every PUT: so the uploader also reads the lock
// back and, around the manifest, checks that every object it wrote is still its own (upload.cc).
//
// Not thread-safe: one upload's thread uses it.
#ifndef DDPIO_STORAGE_REMOTE_UPLOAD_LOCK_H_
#define DDPIO_STORAGE_REMOTE_UPLOAD_LOCK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/storage/s3/object_store.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::storage::remote {

inline constexpr char kUploadLockObject[] = "ddpio-upload.lock";

struct UploadLockOptions {
  // How long the lock holds without renewal: an upload that died frees the prefix after this.
  // Renewed when a third of it has passed, between parts (a part takes far less).
  int64_t lease_seconds = 600;
  // Seconds since the epoch; tests set their own clock.
  std::function<int64_t()> now;
};

class UploadLock {
 public:
  // Takes the lock of `dest` for the upload named `token` (letters and digits).
  // FailedPrecondition naming the holder (host, process, since, until) when another upload holds
  // it; the store's errors otherwise.
  static absl::StatusOr<std::unique_ptr<UploadLock>> Acquire(s3::ObjectStore& s3,
                                                             const s3::S3Url& dest,
                                                             const std::string& token,
                                                             UploadLockOptions options = {});
  // Extends the lease when a third of it has passed (`force`: now). Aborted when the lock is no
  // longer this upload's (its lease ran out and another upload took it).
  absl::Status Renew(bool force = false);
  // Aborted unless the lock object in the store is this upload's (read back: a store that
  // ignores conditional PUTs is caught here).
  absl::Status Check();
  // Deletes the lock (best effort: a lock left behind runs out with its lease).
  void Release();

  const std::string& token() const { return token_; }

 private:
  UploadLock(s3::ObjectStore& s3, s3::S3Url dest, std::string token, UploadLockOptions options)
      : s3_(s3), dest_(std::move(dest)), token_(std::move(token)), options_(std::move(options)) {}
  std::string Body(int64_t now) const;
  std::string Key() const { return dest_.Key(kUploadLockObject); }

  s3::ObjectStore& s3_;
  const s3::S3Url dest_;
  const std::string token_;
  const UploadLockOptions options_;
  std::string etag_;     // of the lock object as this upload last wrote it
  int64_t started_ = 0;  // when this upload first took it
  int64_t renewed_ = 0;  // when it last wrote it
};

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_UPLOAD_LOCK_H_
