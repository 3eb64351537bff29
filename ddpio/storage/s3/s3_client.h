// S3Client: the ObjectStore (object_store.h) of an S3-compatible endpoint — whole and ranged GETs
// (asynchronous ones many in flight), HEAD, PUT, multipart uploads, bucket creation — over
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
#include "ddpio/storage/s3/object_store.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::storage::s3 {

class S3Client : public ObjectStore {
 public:
  static absl::StatusOr<std::unique_ptr<S3Client>> Create(const S3Config& config,
                                                          const S3ClientOptions& options = {});

  absl::StatusOr<std::string> Get(const std::string& bucket, const std::string& key,
                                  uint64_t max_bytes) override;
  absl::StatusOr<std::string> GetRange(const std::string& bucket, const std::string& key,
                                       uint64_t offset, uint64_t length) override;
  void GetRangeAsync(const std::string& bucket, const std::string& key, uint64_t offset,
                     uint64_t length, RangeDone done) override;
  absl::StatusOr<Object> GetObject(const std::string& bucket, const std::string& key,
                                   uint64_t max_bytes) override;
  absl::StatusOr<uint64_t> Size(const std::string& bucket, const std::string& key) override;
  absl::StatusOr<ObjectInfo> Head(const std::string& bucket, const std::string& key) override;
  absl::Status Put(const std::string& bucket, const std::string& key, std::string body) override;
  // Sent with If-None-Match: * or If-Match (Ceph's gateway compares If-Match unquoted, AWS
  // documents the quoted form: both are tried); HTTP 412 (and S3's 409 for a concurrent
  // conditional write) is FailedPrecondition.
  absl::StatusOr<std::string> PutConditional(const std::string& bucket, const std::string& key,
                                             std::string body,
                                             const std::string& if_match = "") override;
  absl::StatusOr<std::string> PutWithEtag(const std::string& bucket, const std::string& key,
                                          std::string body) override;
  absl::Status Delete(const std::string& bucket, const std::string& key) override;
  absl::Status CreateBucket(const std::string& bucket) override;
  absl::StatusOr<std::string> CreateMultipartUpload(const std::string& bucket,
                                                    const std::string& key) override;
  absl::StatusOr<std::string> UploadPart(const std::string& bucket, const std::string& key,
                                         const std::string& upload_id, int part,
                                         std::string body) override;
  // Ceph's gateway answers with an empty ETag: the object's HEAD then gives it.
  absl::StatusOr<std::string> CompleteMultipartUpload(
      const std::string& bucket, const std::string& key, const std::string& upload_id,
      const std::vector<std::pair<int, std::string>>& parts) override;
  absl::StatusOr<std::vector<Part>> ListParts(const std::string& bucket, const std::string& key,
                                              const std::string& upload_id) override;

  HttpCounters counters() const override { return http_->counters(); }
  const S3Config& config() const override { return config_; }

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
