// ObjectStore: the operations ddpio asks of an object store — whole and ranged GETs (asynchronous
// ones many in flight), HEAD, PUT (plain, conditional), DELETE, bucket creation and multipart
// uploads — with the error codes the remote reader and the upload rely on: NotFound for a missing
// object, OutOfRange for a range starting past the end, DataLoss for an answer of the wrong length
// or without what it must carry, FailedPrecondition for a conditional PUT whose condition fails,
// PermissionDenied / Unauthenticated for refused credentials, Unavailable / DeadlineExceeded once
// the retries are spent (see http_client.h). Messages name the object as s3://bucket/key.
//
// S3Client (s3_client.h) implements it over HTTP for any S3-compatible endpoint; a test store
// (tests/support/memory_object_store.h) implements it in memory with faults on demand. Code that
// talks to a store opens one with OpenObjectStore, which picks the implementation by the
// endpoint's scheme: http(s):// is S3's; another scheme is whatever RegisterObjectStore gave it
// (the test store is "memory://NAME"; another cloud's protocol would be one more).
//
// Thread-safe. An asynchronous callback runs on the store's own thread (S3Client) or on the
// caller's before GetRangeAsync returns (the test store): the caller must not hold a lock the
// callback takes, and the callback must not block on the store.
#ifndef DDPIO_STORAGE_S3_OBJECT_STORE_H_
#define DDPIO_STORAGE_S3_OBJECT_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/storage/s3/http_client.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::storage::s3 {

// How a store client behaves (a store that needs no retries may ignore `retry`).
struct S3ClientOptions {
  RetryPolicy retry;
  int max_in_flight = 32;
  int in_flight_limit = 0;        // 0: max_in_flight, fixed (HttpClient::Options)
  double max_requests_per_s = 0;  // 0: no cap (HttpClient::Options)
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // The whole object, at most `max_bytes` (DataLoss beyond).
  virtual absl::StatusOr<std::string> Get(const std::string& bucket, const std::string& key,
                                          uint64_t max_bytes) = 0;
  // Exactly bytes [offset, offset + length) of the object; DataLoss for an answer of another
  // length (a range past the end, a server ignoring Range), OutOfRange when the range starts past
  // the end. A length of 0 is an empty string, asked of nobody.
  virtual absl::StatusOr<std::string> GetRange(const std::string& bucket, const std::string& key,
                                               uint64_t offset, uint64_t length) = 0;
  using RangeDone = std::function<void(absl::StatusOr<std::string>)>;
  virtual void GetRangeAsync(const std::string& bucket, const std::string& key, uint64_t offset,
                             uint64_t length, RangeDone done) = 0;
  // The whole object and its ETag (quotes kept), at most `max_bytes` (DataLoss beyond).
  struct Object {
    std::string body;
    std::string etag;
  };
  virtual absl::StatusOr<Object> GetObject(const std::string& bucket, const std::string& key,
                                           uint64_t max_bytes) = 0;
  // The object's size (HEAD).
  virtual absl::StatusOr<uint64_t> Size(const std::string& bucket, const std::string& key) = 0;
  // The object's size and ETag (HEAD); DataLoss when the answer lacks either.
  struct ObjectInfo {
    uint64_t size = 0;
    std::string etag;
  };
  virtual absl::StatusOr<ObjectInfo> Head(const std::string& bucket, const std::string& key) = 0;
  virtual absl::Status Put(const std::string& bucket, const std::string& key, std::string body) = 0;
  // A PUT that happens only if the object does not exist yet (`if_match` empty) or still has ETag
  // `if_match`: how writers that must exclude each other take and renew a lock. The new object's
  // ETag; FailedPrecondition when the condition fails. A store that ignores conditions writes
  // regardless (callers verify what they wrote).
  virtual absl::StatusOr<std::string> PutConditional(const std::string& bucket,
                                                     const std::string& key, std::string body,
                                                     const std::string& if_match = "") = 0;
  // PUT; the new object's ETag (DataLoss when the answer has none).
  virtual absl::StatusOr<std::string> PutWithEtag(const std::string& bucket, const std::string& key,
                                                  std::string body) = 0;
  virtual absl::Status Delete(const std::string& bucket, const std::string& key) = 0;
  // Creates `bucket`; OK when this account already owns it.
  virtual absl::Status CreateBucket(const std::string& bucket) = 0;

  // Multipart upload: the upload id; each part's ETag; completion with (part number, ETag) in
  // order, giving the object's ETag as HEAD reports it. ListParts gives what an interrupted upload
  // already holds (resume).
  virtual absl::StatusOr<std::string> CreateMultipartUpload(const std::string& bucket,
                                                            const std::string& key) = 0;
  virtual absl::StatusOr<std::string> UploadPart(const std::string& bucket, const std::string& key,
                                                 const std::string& upload_id, int part,
                                                 std::string body) = 0;
  virtual absl::StatusOr<std::string> CompleteMultipartUpload(
      const std::string& bucket, const std::string& key, const std::string& upload_id,
      const std::vector<std::pair<int, std::string>>& parts) = 0;
  struct Part {
    int number = 0;
    std::string etag;
    uint64_t size = 0;
  };
  virtual absl::StatusOr<std::vector<Part>> ListParts(const std::string& bucket,
                                                      const std::string& key,
                                                      const std::string& upload_id) = 0;

  // What was asked of the store through this client (attempts, retries, bytes).
  virtual HttpCounters counters() const = 0;
  virtual const S3Config& config() const = 0;

  // "s3://bucket/key", how messages name an object.
  static std::string Name(const std::string& bucket, const std::string& key);
};

using ObjectStoreFactory = std::function<absl::StatusOr<std::unique_ptr<ObjectStore>>(
    const S3Config& config, const S3ClientOptions& options)>;

// Makes endpoints "SCHEME://..." open stores made by `factory` (replacing an earlier one).
// Thread-safe.
void RegisterObjectStore(const std::string& scheme, ObjectStoreFactory factory);

// A client of the store `config` names: S3Client for an http:// or https:// endpoint, the
// registered factory for another scheme; InvalidArgument for a scheme nobody registered.
absl::StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStore(const S3Config& config,
                                                             const S3ClientOptions& options = {});

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_OBJECT_STORE_H_
