// HttpClient: many HTTP requests in flight on one thread (libcurl's multi interface), for the
// object store. Connections are kept alive and reused; requests are signed with AWS SigV4 by
// libcurl itself; each attempt has a timeout and a low-speed limit (so a stalled or trickling
// transfer ends); failures that may pass — 5xx, 429, S3's 503 SlowDown, resets, timeouts, refused
// connections — are retried with capped exponential backoff and full jitter, a bounded number of
// times or for a bounded time (RetryPolicy), then reported naming the request, the endpoint, the
// attempts, the time spent and the last status. Responses are bounded: a success announcing or
// sending more than the request allows is DataLoss, and memory follows the bytes that arrive, never
// a server's announcement; an error document is read only as far as its first 64 KiB.
//
//   HttpClient::Options o;
//   o.sigv4 = "aws:amz:us-east-1:s3";
//   o.user_password = key + ":" + secret;
//   o.retry.give_up_after = std::chrono::minutes(5);  // ride out an outage of up to 5 minutes
//   DDPIO_ASSIGN_OR_RETURN(auto http, HttpClient::Create(o));
//   http->Submit(request, [](absl::StatusOr<HttpResponse> r) { ... });  // on the client's thread
//
// Thread-safe: Submit and Execute from any thread. Callbacks (`done`, Options::on_retry) run on the
// client's own thread and must neither block on the client (Execute from a callback deadlocks) nor
// throw. Destruction cancels what is pending (callbacks get Cancelled) and joins the thread.
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
#include "ddpio/storage/s3/in_flight_window.h"
#include "ddpio/storage/s3/node_signal.h"
#include "ddpio/storage/s3/retry_policy.h"

namespace ddpio::storage::s3 {

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // sent with PUT and POST (Content-Length set)
  // A success with more is DataLoss, not memory. Memory follows the bytes that arrive: a
  // Content-Length within this limit sizes the buffer up front only up to 16 MiB.
  uint64_t max_response_bytes = uint64_t{64} << 20;
  std::string what;  // how errors name it: "GET s3://bucket/key bytes=0-99"
  // The bytes the answer carries when known (a range GET's length; a PUT's body counts anyway):
  // an attempt then has its attempt_timeout plus what they take at kMinTransferBytesPerS, so a
  // large GET sharing a slow link with many others is not cut, and retried from its first byte
  // again and again, while it moves (the low-speed limit still ends one that stalls).
  uint64_t transfer_bytes = 0;
  static constexpr uint64_t kMinTransferBytesPerS = 16 << 10;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string etag;             // the ETag header, quotes kept
  int64_t content_length = -1;  // the Content-Length header (a HEAD's object size); -1 when absent
  int attempts = 0;
};

struct HttpCounters {
  uint64_t requests = 0;  // attempts sent (retries included)
  uint64_t retries = 0;
  uint64_t bytes_received = 0;  // response bodies
  uint64_t bytes_sent = 0;      // request bodies
  uint64_t failed = 0;          // requests that ended in an error
  // Signs the store is overrun (503, 429, a timed-out attempt) and the rate the client's
  // governor allows now, requests a second (0: unlimited; rate_governor.h).
  uint64_t throttles = 0;
  double rate_limit_per_s = 0;
  // The largest in-flight window the client allowed (in_flight_window.h; sized as requests
  // succeed): how many it would keep at once when that many were asked for.
  int in_flight_window_max = 0;
};

class HttpClient {
 public:
  struct Options {
    RetryPolicy retry;
    // Transfers at once (at least, with in_flight_limit); more wait in order.
    int max_in_flight = 32;
    // Not 0: the most transfers at once. Above max_in_flight the window opens up to it when
    // Little's law says the store's latency needs them for the rate requests complete at
    // (in_flight_window.h); below, it holds the client at this many. 0: max_in_flight, fixed.
    int in_flight_limit = 0;
    // Requests started a second at most (retries included), 0: no cap. Either way the rate falls
    // when the store says it is overrun and grows back after (RateGovernor).
    double max_requests_per_s = 0;
    // Not empty: the clients of this node given the same key (the store's endpoint) back off
    // together — a push-back one of them hears slows every one down (node_signal.h, a file in
    // node_signal_dir). Without it, or when the file cannot be used (logged once), each client
    // backs off on its own.
    std::string node_signal_key;
    std::string node_signal_dir = NodeSignal::kDefaultDir;
    std::string sigv4;          // CURLOPT_AWS_SIGV4, e.g. "aws:amz:us-east-1:s3"; "" signs nothing
    std::string user_password;  // "ACCESS_KEY:SECRET_KEY" for SigV4
    // Said after the error when the server refuses the credentials (see RefusesCredentials).
    std::string refused_hint;
    // Told of each failed attempt that will be retried, before the backoff: the request's `what`
    // (its URL when `what` is empty), the attempts made so far (the failed one included), the time
    // since the first attempt began, and the failed attempt's error (the Status the request would
    // end with, without the tally of attempts). For a progress line such as "still retrying GET
    // s3://b/k (attempt 7, 42 s so far): ... HTTP 503 SlowDown". Runs on the client's thread: it
    // must return quickly, must not block on the client and must not throw. Empty: nothing called.
    std::function<void(const std::string& what, int attempt, std::chrono::milliseconds waited,
                       const absl::Status& last)>
        on_retry;
  };
  using Done = std::function<void(absl::StatusOr<HttpResponse>)>;

  // Internal when libcurl cannot be set up.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(const Options& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts `request`; `done` gets the response of a 2xx answer, or the error: NotFound (404),
  // PermissionDenied (403; S3's code and message included), Unauthenticated (401, or a 400 that
  // refuses the credentials), OutOfRange (416), InvalidArgument (other 4xx), Unavailable (5xx, 429
  // or a transport failure after the last attempt), DeadlineExceeded (the last attempt timed out or
  // fell under the low-speed limit), DataLoss (a success larger than allowed), ResourceExhausted
  // (no memory for a response within the allowed size), Cancelled (the client was destroyed
  // first, or RetryPolicy::cancel was raised). An error status is classified by its status line
  // even when its body is cut short or longer than the 64 KiB read of it. A transport error names
  // the endpoint (host:port), the attempts, the time they took and the limits each attempt had.
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

// Whether a final answer refuses the request's credentials: 401, 403, or a 400 whose S3 code says
// so (ExpiredToken, InvalidToken, InvalidAccessKeyId, AuthorizationHeaderMalformed,
// AuthorizationQueryParametersError, TokenRefreshRequired), or an InvalidArgument whose Message or
// ArgumentName names the token or the Authorization header (AWS's way) — or a bare InvalidArgument,
// no Message, to a request that carried a session token: Ceph's gateway answers so when it cannot
// decode the token. Other 400s (a bad query, a bad part number) do not.
bool RefusesCredentials(long status, const std::string& body, bool sent_session_token);

// What an error Status says around the status and S3's code: the request, how it was tried, and
// what to say if the credentials were refused.
struct HttpErrorContext {
  std::string what;                       // "GET s3://bucket/key"
  int attempts = 1;                       // said when more than one
  std::chrono::milliseconds elapsed{-1};  // since the first attempt began; < 0: not said
  std::string refused_hint;               // said after the error when RefusesCredentials
  bool sent_session_token = false;        // the request carried x-amz-security-token
};

// The error Status for a final answer `status` with `body` (an S3 XML error document, or its
// first bytes, whose Code and Message are quoted).
absl::Status HttpError(long status, const std::string& body, const HttpErrorContext& context);
// The same, for a request named `what` after `attempts` attempts.
absl::Status HttpError(long status, const std::string& body, const std::string& what, int attempts,
                       const std::string& refused_hint = "");

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_HTTP_CLIENT_H_
