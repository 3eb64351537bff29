// S3Client: the object-store operations ddpio uses — whole and ranged GETs (asynchronous ones many
// in flight), HEAD, PUT, multipart uploads, bucket creation — on an S3-compatible endpoint, over
// HttpClient (keep-alive, SigV4 by libcurl, retries with backoff; see http_client.h for the error
// codes). Path-style addressing: ENDPOINT/BUCKET/KEY, the key percent-encoded but for '/'.
// Messages name the object as s3://bucket/key (and the range), never a credential.
//
//   DDPIO_ASSIGN_OR_RETURN(auto s3, S3Client::Create(config));
//   DDPIO_ASSIGN_OR_RETURN(std::string bytes, s3->GetRange("bucket", "train/data.mdb", 4096,
//   100000));
//
// Thread-safe. Asynchronous callbacks run on the client's thread (must not block on it).
#ifndef DDPIO_STORAGE_S3_S3_CLIENT_H_
#define DDPIO_STORAGE_S3_S3_CLIENT_H_

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

struct S3ClientOptions {
  RetryPolicy retry;
  int max_in_flight = 32;
};

class S3Client {
 public:
  static absl::StatusOr<std::unique_ptr<S3Client>> Create(const S3Config& config,
                                                          const S3ClientOptions& options = {});

  // The whole object, at most `max_bytes` (DataLoss beyond).
  absl::StatusOr<std::string> Get(const std::string& bucket, const std::string& key,
                                  uint64_t max_bytes);
  // Exactly bytes [offset, offset + length) of the object; DataLoss for an answer of another
  // length (a range past the end, a server ignoring Range), OutOfRange when the range starts past
  // the end.
  absl::StatusOr<std::string> GetRange(const std::string& bucket, const std::string& key,
                                       uint64_t offset, uint64_t length);
  using RangeDone = std::function<void(absl::StatusOr<std::string>)>;
  void GetRangeAsync(const std::string& bucket, const std::string& key, uint64_t offset,
                     uint64_t length, RangeDone done);
  // The whole object and its ETag (quotes kept), at most `max_bytes` (DataLoss beyond).
  struct Object {
    std::string body;
    std::string etag;
  };
  absl::StatusOr<Object> GetObject(const std::string& bucket, const std::string& key,
                                   uint64_t max_bytes);
  // The object's size (HEAD).
  absl::StatusOr<uint64_t> Size(const std::string& bucket, const std::string& key);
  // The object's size and ETag (HEAD); DataLoss when the answer lacks either.
  struct ObjectInfo {
    uint64_t size = 0;
    std::string etag;
  };
  absl::StatusOr<ObjectInfo> Head(const std::string& bucket, const std::string& key);
  absl::Status Put(const std::string& bucket, const std::string& key, std::string body);
  // A PUT that happens only if the object does not exist yet (`if_match` empty: If-None-Match: *)
  // or still has ETag `if_match` (If-Match): how writers that must exclude each other take and
  // renew a lock. The new object's ETag; FailedPrecondition (HTTP 412) when the condition fails.
  // A store that ignores the headers writes regardless (callers verify what they wrote).
  absl::StatusOr<std::string> PutConditional(const std::string& bucket, const std::string& key,
                                             std::string body, const std::string& if_match = "");
  // PUT; the new object's ETag (DataLoss when the answer has none).
  absl::StatusOr<std::string> PutWithEtag(const std::string& bucket, const std::string& key,
                                          std::string body);
  absl::Status Delete(const std::string& bucket, const std::string& key);
  // Creates `bucket`; OK when this account already owns it.
  absl::Status CreateBucket(const std::string& bucket);

  // Multipart upload: the upload id; each part's ETag; completion with (part number, ETag) in
  // order. ListParts gives what an interrupted upload already holds (resume).
  absl::StatusOr<std::string> CreateMultipartUpload(const std::string& bucket,
                                                    const std::string& key);
  absl::StatusOr<std::string> UploadPart(const std::string& bucket, const std::string& key,
                                         const std::string& upload_id, int part, std::string body);
  // The completed object's ETag (as HEAD will report it).
  absl::StatusOr<std::string> CompleteMultipartUpload(
      const std::string& bucket, const std::string& key, const std::string& upload_id,
      const std::vector<std::pair<int, std::string>>& parts);
  struct Part {
    int number = 0;
    std::string etag;
    uint64_t size = 0;
  };
  absl::StatusOr<std::vector<Part>> ListParts(const std::string& bucket, const std::string& key,
                                              const std::string& upload_id);

  HttpCounters counters() const { return http_->counters(); }
  const S3Config& config() const { return config_; }

  // "s3://bucket/key", how messages name an object.
  static std::string Name(const std::string& bucket, const std::string& key);
  // The request URL of `key` in `bucket` (path-style), with `query` ("uploads", "uploadId=..").
  std::string Url(const std::string& bucket, const std::string& key,
                  const std::string& query = "") const;

 private:
  S3Client(S3Config config, std::unique_ptr<HttpClient> http)
      : config_(std::move(config)), http_(std::move(http)) {}
  HttpRequest Request(const std::string& method, const std::string& bucket, const std::string& key,
                      const std::string& query, std::string what) const;

  const S3Config config_;
  std::unique_ptr<HttpClient> http_;
};

// `key` percent-encoded for a URL path ('/' and RFC 3986's unreserved characters kept).
std::string EncodeKey(const std::string& key);

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_S3_CLIENT_H_
