// HttpClient: many HTTP requests in flight on one thread (libcurl's multi interface), for the
// object store. Connections are kept alive and reused; requests are signed with AWS SigV4 by
// libcurl itself; each attempt has a timeout (and a low-speed limit, so a stalled transfer ends);
// failures that may pass — 5xx, 429, S3's 503 SlowDown, resets, timeouts, refused connections —
// are retried with capped exponential backoff and full jitter, a bounded number of times, then
// reported naming the request, the attempts and the last status. Responses are bounded: a
// server announcing or sending more than the request allows is an error, never unbounded memory.
//
//   HttpClient::Options o;
//   o.sigv4 = "aws:amz:us-east-1:s3";
//   o.user_password = key + ":" + secret;
//   DDPIO_ASSIGN_OR_RETURN(auto http, HttpClient::Create(o));
//   http->Submit(request, [](absl::StatusOr<HttpResponse> r) { ... });  // on the client's thread
//
// Thread-safe: Submit and Execute from any thread. Callbacks run on the client's own thread and
// must not block on the client (Execute from a callback deadlocks). Destruction cancels what is
// pending (callbacks get Cancelled) and joins the thread.
#ifndef DDPIO_STORAGE_S3_HTTP_CLIENT_H_
#define DDPIO_STORAGE_S3_HTTP_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::storage::s3 {

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;
  std::vector<std::string> headers;                  // "Name: value"
  std::string body;                                  // sent with PUT and POST (Content-Length set)
  uint64_t max_response_bytes = uint64_t{64} << 20;  // more is DataLoss, not memory
  std::string what;  // how errors name it: "GET s3://bucket/key bytes=0-99"
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string etag;             // the ETag header, quotes kept
  int64_t content_length = -1;  // the Content-Length header (a HEAD's object size); -1 when absent
  int attempts = 0;
};

struct RetryPolicy {
  int max_attempts = 8;                                          // in all, the first included
  std::chrono::milliseconds base_delay{50};                      // the first retry waits up to this
  std::chrono::milliseconds max_delay{std::chrono::seconds(5)};  // the cap of the exponential
  std::chrono::milliseconds attempt_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
};

struct HttpCounters {
  uint64_t requests = 0;  // attempts sent (retries included)
  uint64_t retries = 0;
  uint64_t bytes_received = 0;  // response bodies
  uint64_t bytes_sent = 0;      // request bodies
  uint64_t failed = 0;          // requests that ended in an error
};

class HttpClient {
 public:
  struct Options {
    RetryPolicy retry;
    int max_in_flight = 32;     // transfers at once; more wait in order
    std::string sigv4;          // CURLOPT_AWS_SIGV4, e.g. "aws:amz:us-east-1:s3"; "" signs nothing
    std::string user_password;  // "ACCESS_KEY:SECRET_KEY" for SigV4
    // Said after the error when the server refuses the credentials (401, 403, or 400 with
    // ExpiredToken, InvalidToken or InvalidAccessKeyId): where they came from, what to check.
    std::string refused_hint;
  };
  using Done = std::function<void(absl::StatusOr<HttpResponse>)>;

  // Internal when libcurl cannot be set up.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(const Options& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts `request`; `done` gets the response of a 2xx answer, or the error: NotFound (404),
  // PermissionDenied (403; S3's code and message included), Unauthenticated (401), OutOfRange
  // (416), InvalidArgument (other 4xx), Unavailable (5xx, 429 or a transport failure after the
  // last attempt), DeadlineExceeded (the last attempt timed out), DataLoss (a response larger than
  // allowed), Cancelled (the client was destroyed first).
  void Submit(HttpRequest request, Done done);
  // Submit and wait.
  absl::StatusOr<HttpResponse> Execute(HttpRequest request);

  HttpCounters counters() const;

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether an HTTP status is worth another attempt (5xx, 429, 408).
bool RetryableHttpStatus(long status);

// The error Status for a final answer `status` with `body` (an S3 XML error document, whose
// Code and Message are quoted) to `what`, after `attempts` attempts; `refused_hint` follows
// when the answer refuses the credentials.
absl::Status HttpError(long status, const std::string& body, const std::string& what, int attempts,
                       const std::string& refused_hint = "");

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_HTTP_CLIENT_H_
