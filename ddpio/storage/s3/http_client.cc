#include "ddpio/storage/s3/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/log.h"
#include "ddpio/storage/s3/node_signal.h"
#include "ddpio/storage/s3/rate_governor.h"
#include "ddpio/storage/s3/s3_xml.h"

namespace ddpio::storage::s3 {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The part of an error document read: S3's XML puts Code and Message first, in a few hundred
// bytes. A longer body is cut here and the transfer ended; its status still decides.
constexpr size_t kErrorBodyBytes = size_t{64} << 10;
// The most a success's Content-Length reserves up front: every range GET the loader makes (8 MiB
// by default) fits in one allocation; a larger body grows as its bytes arrive, so a server that
// announces terabytes and sends little costs little.
constexpr uint64_t kMaxReserve = uint64_t{16} << 20;
// With RetryPolicy::cancel, how often the client's thread looks at it.
constexpr int kCancelCheckMs = 100;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Transport failures worth another attempt: the server or the path may come back.
bool RetryableCurl(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

// "250 ms", "5 s", "2.3 s", "312 s": durations as messages say them.
std::string Said(milliseconds d) {
  const int64_t ms = d.count();
  if (ms < 1000) return absl::StrCat(ms, " ms");
  if (ms % 1000 == 0 || ms >= 100000) return absl::StrCat((ms + 500) / 1000, " s");
  return absl::StrFormat("%.1f s", static_cast<double>(ms) / 1000);
}

// "host:port" of `url` (the scheme's port when the URL names none); the URL itself when it does
// not parse.
std::string Endpoint(const std::string& url) {
  std::string endpoint = url;
  CURLU* u = curl_url();
  if (u != nullptr && curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK) {
    char* host = nullptr;
    char* port = nullptr;
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
      endpoint = absl::StrCat(host, ":", port);
    }
    curl_free(host);
    curl_free(port);
  }
  curl_url_cleanup(u);
  return endpoint;
}

bool CarriesSessionToken(const HttpRequest& request) {
  return std::any_of(request.headers.begin(), request.headers.end(), [](const std::string& h) {
    return absl::StartsWithIgnoreCase(h, "x-amz-security-token:");
  });
}

}  // namespace

bool RetryableHttpStatus(long status) { return status >= 500 || status == 429 || status == 408; }

bool RefusesCredentials(long status, const std::string& body, bool sent_session_token) {
  if (status == 401 || status == 403) return true;
  if (status != 400) return false;
  const std::string code = XmlText(body, "Code");
  if (code == "ExpiredToken" || code == "InvalidToken" || code == "InvalidAccessKeyId" ||
      code == "AuthorizationHeaderMalformed" || code == "AuthorizationQueryParametersError" ||
      code == "TokenRefreshRequired") {
    return true;
  }
  if (code != "InvalidArgument") return false;
  const std::string message = XmlText(body, "Message"), argument = XmlText(body, "ArgumentName");
  // AWS names the culprit: "Authorization header is invalid", ArgumentName x-amz-security-token.
  const std::string about = absl::AsciiStrToLower(absl::StrCat(message, " ", argument));
  if (absl::StrContains(about, "x-amz-security-token") ||
      absl::StrContains(about, "authorization") || absl::StrContains(about, "security token") ||
      absl::StrContains(about, "session token") || absl::StrContains(about, "credential")) {
    return true;
  }
  // Ceph's gateway names nothing: a session token it cannot decode (STSEngine's -EINVAL) comes
  // back as a bare InvalidArgument.
  return sent_session_token && message.empty() && argument.empty();
}

absl::Status HttpError(long status, const std::string& body, const HttpErrorContext& context) {
  const std::string code = XmlText(body, "Code"), message = XmlText(body, "Message");
  std::string detail = absl::StrCat("HTTP ", status);
  if (!code.empty()) absl::StrAppend(&detail, " ", code);
  if (!message.empty()) absl::StrAppend(&detail, ": ", message.substr(0, 300));
  std::string text = absl::StrCat(context.what, ": ", detail);
  if (context.attempts > 1) {
    absl::StrAppend(&text, " (after ", context.attempts, " attempts",
                    context.elapsed.count() >= 0 ? absl::StrCat(" in ", Said(context.elapsed)) : "",
                    ")");
  }
  const bool refused = RefusesCredentials(status, body, context.sent_session_token);
  if (refused && !context.refused_hint.empty()) absl::StrAppend(&text, ". ", context.refused_hint);
  if (status == 404) return absl::NotFoundError(text);
  if (status == 403) return absl::PermissionDeniedError(text);
  if (status == 401 || (status == 400 && refused)) return absl::UnauthenticatedError(text);
  if (status == 416) return absl::OutOfRangeError(text);
  if (RetryableHttpStatus(status)) return absl::UnavailableError(text);
  return absl::InvalidArgumentError(text);
}

absl::Status HttpError(long status, const std::string& body, const std::string& what, int attempts,
                       const std::string& refused_hint) {
  HttpErrorContext context;
  context.what = what;
  context.attempts = attempts;
  context.refused_hint = refused_hint;
  return HttpError(status, body, context);
}

struct HttpClient::Impl {
  struct Transfer {
    HttpRequest request;
    Done done;
    std::string endpoint;             // "host:port", for messages
    bool sent_session_token = false;  // for RefusesCredentials
    int attempts = 0;
    Clock::time_point first_start;    // of the first attempt: the retry budget counts from here
    Clock::time_point attempt_start;  // of this attempt: the in-flight window's time taken
    Clock::time_point not_before;
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    // The attempt's answer.
    std::string body;  // a success's bytes, or an error document's first kErrorBodyBytes
    std::string etag;
    int64_t content_length = -1;
    size_t sent = 0;              // of request.body
    bool too_large = false;       // a success over max_response_bytes
    bool out_of_memory = false;   // a success within it that could not be held
    bool error_body_cut = false;  // an error document longer than kErrorBodyBytes, ended there
    char error[CURL_ERROR_SIZE] = {};
  };
  // How an attempt ended, read from its handle before the handle goes.
  struct Ending {
    CURLcode code = CURLE_OK;
    long status = 0;       // 0: no status line arrived
    int64_t received = 0;  // header and body bytes
  };

  Options options;
  CURLM* multi = nullptr;
  std::thread thread;

  std::mutex mu;
  std::deque<std::unique_ptr<Transfer>> queued;  // guarded by mu
  bool stop = false;                             // guarded by mu
  HttpCounters counts;                           // guarded by mu
  std::optional<RateGovernor> governor;          // guarded by mu; made by Create
  std::optional<InFlightWindow> window;          // guarded by mu; made by Create
  // The node's other clients of this store (Options::node_signal_key; null: none), and the latest
  // push-back of theirs already heard (guarded by mu).
  std::unique_ptr<NodeSignal> node;
  Clock::time_point node_heard{};

  // With mu held: a push-back another client of the node raised since the last one heard slows
  // this one down too.
  void HearNodeLocked(Clock::time_point now) {
    if (node == nullptr) return;
    const std::optional<Clock::time_point> latest = node->Latest(now);
    if (!latest.has_value() || *latest == node_heard) return;
    node_heard = *latest;
    governor->PeerThrottled(now);
    counts.rate_limit_per_s = governor->rate_per_s();
  }

  // The thread's own.
  std::vector<std::unique_ptr<Transfer>> waiting;  // retries not due yet
  std::vector<std::unique_ptr<Transfer>> running;
  std::mt19937_64 random{std::random_device{}()};

  static bool Success(const Transfer& t) {
    long status = 0;
    curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
    return status >= 200 && status < 300;
  }
  // An error document: its first kErrorBodyBytes are kept (they hold S3's Code and Message), the
  // transfer is ended after them. A success: at most max_response_bytes, in memory sized by the
  // bytes that arrive (and by Content-Length up to kMaxReserve); no exception leaves the callback.
  static size_t Write(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * n;
    if (!Success(*t)) {
      const size_t keep =
          std::min(bytes, kErrorBodyBytes - std::min(kErrorBodyBytes, t->body.size()));
      t->body.append(data, keep);
      if (keep == bytes) return bytes;
      t->error_body_cut = true;
      return 0;  // ends the transfer; Complete classifies by the status
    }
    if (t->body.size() + bytes > t->request.max_response_bytes) {
      t->too_large = true;
      return 0;  // aborts the transfer
    }
    try {
      // One allocation of the announced size, not a doubling series of copies (a record of
      // 100 KB arrives in ~16 KB writes) — but never more than kMaxReserve on a server's word.
      if (t->body.empty() && t->content_length > 0) {
        t->body.reserve(
            static_cast<size_t>(std::min<uint64_t>({static_cast<uint64_t>(t->content_length),
                                                    t->request.max_response_bytes, kMaxReserve})));
      }
      t->body.append(data, bytes);
    } catch (const std::exception&) {  // bad_alloc, length_error: the thread must go on
      t->out_of_memory = true;
      return 0;
    }
    return bytes;
  }
  static size_t Read(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = std::min(size * n, t->request.body.size() - t->sent);
    std::memcpy(data, t->request.body.data() + t->sent, bytes);
    t->sent += bytes;
    return bytes;
  }
  static size_t Header(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    absl::string_view line(data, size * n);
    if (absl::StartsWith(line, "HTTP/")) {  // a new response (after a 100 Continue, say)
      t->etag.clear();
      t->content_length = -1;
    } else if (absl::StartsWithIgnoreCase(line, "etag:")) {
      t->etag = std::string(absl::StripAsciiWhitespace(line.substr(5)));
    } else if (absl::StartsWithIgnoreCase(line, "content-length:")) {
      int64_t v = -1;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &v) && v >= 0)
        t->content_length = v;
      // A success announced larger than allowed: ended before a byte of it arrives (a HEAD's
      // length is the object's, not a body; an error's body is read only in part anyway).
      if (t->request.method != "HEAD" && t->content_length > 0 && Success(*t) &&
          static_cast<uint64_t>(t->content_length) > t->request.max_response_bytes) {
        t->too_large = true;
        return 0;
      }
    }
    return size * n;
  }

  static const std::string& Name(const Transfer& t) {
    return t.request.what.empty() ? t.request.url : t.request.what;
  }

  void SetLimits(CURL* e, const HttpRequest& r) {
    const RetryPolicy& p = options.retry;
    int64_t timeout_ms = p.attempt_timeout.count();
    const uint64_t moved = std::max<uint64_t>(r.transfer_bytes, r.body.size());
    if (timeout_ms > 0 && moved > 0) {  // HttpRequest::transfer_bytes; capped at a day
      timeout_ms += static_cast<int64_t>(
          std::min<uint64_t>(moved / HttpRequest::kMinTransferBytesPerS * 1000, 86'400'000));
    }
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(p.connect_timeout.count()));
    if (p.low_speed_bytes_per_s > 0) {
      curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT,
                       static_cast<long>(std::min<uint64_t>(p.low_speed_bytes_per_s,
                                                            std::numeric_limits<long>::max())));
      curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                       static_cast<long>(std::max<int64_t>(1, p.low_speed_window.count())));
    }
  }

  void Start(std::unique_ptr<Transfer> t) {
    t->body.clear();
    t->etag.clear();
    t->content_length = -1;
    t->sent = 0;
    t->too_large = false;
    t->out_of_memory = false;
    t->error_body_cut = false;
    t->error[0] = '\0';
    t->attempt_start = Clock::now();
    if (t->attempts++ == 0) t->first_start = t->attempt_start;
    CURL* e = curl_easy_init();
    t->easy = e;
    curl_easy_setopt(e, CURLOPT_URL, t->request.url.c_str());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
    SetLimits(e, t->request);
    if (!options.sigv4.empty()) {
      curl_easy_setopt(e, CURLOPT_AWS_SIGV4, options.sigv4.c_str());
      curl_easy_setopt(e, CURLOPT_USERPWD, options.user_password.c_str());
    }
    for (const std::string& h : t->request.headers)
      t->headers = curl_slist_append(t->headers, h.c_str());
    const std::string& m = t->request.method;
    if (m == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (m == "PUT") {
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_READFUNCTION, &Read);
      curl_easy_setopt(e, CURLOPT_READDATA, t.get());
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
                       static_cast<curl_off_t>(t->request.body.size()));
      // No "Expect:" to suppress 100-continue: libcurl 7.88 signs the emptied header that it
      // then leaves out, and the server answers SignatureDoesNotMatch.
    } else if (m == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->request.body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(t->request.body.size()));
    } else if (m != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m.c_str());
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_multi_add_handle(multi, e);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counts.requests;
      if (t->attempts > 1) ++counts.retries;
    }
    running.push_back(std::move(t));
  }

  // Frees the attempt's curl state; the transfer itself stays.
  void Release(Transfer& t) {
    curl_multi_remove_handle(multi, t.easy);
    curl_easy_cleanup(t.easy);
    t.easy = nullptr;
    curl_slist_free_all(t.headers);
    t.headers = nullptr;
  }

  milliseconds Backoff(int attempts) {
    const int64_t cap = options.retry.max_delay.count();
    const int64_t exp = options.retry.base_delay.count() << std::min(attempts - 1, 20);
    std::uniform_int_distribution<int64_t> pick(0, std::max<int64_t>(1, std::min(cap, exp)));
    return milliseconds(pick(random));  // full jitter
  }

  // Whether another attempt, starting at `next`, is within the policy (see RetryPolicy).
  bool MayRetry(const Transfer& t, Clock::time_point next) const {
    if (options.retry.give_up_after.count() > 0)
      return next < t.first_start + options.retry.give_up_after;
    return t.attempts < options.retry.max_attempts;
  }

  static milliseconds Since(Clock::time_point start, Clock::time_point now) {
    return std::chrono::duration_cast<milliseconds>(now - start);
  }

  // "each attempt is allowed 30 s in all, 10 s to connect, and ends under 1024 B/s for 10 s".
  std::string Limits() const {
    const RetryPolicy& p = options.retry;
    std::string text =
        absl::StrCat("each attempt is allowed ",
                     p.attempt_timeout.count() > 0 ? Said(p.attempt_timeout) : "unlimited time",
                     " in all, ", Said(p.connect_timeout), " to connect");
    if (p.low_speed_bytes_per_s > 0) {
      absl::StrAppend(&text, ", and ends under ", p.low_speed_bytes_per_s, " B/s for ",
                      Said(p.low_speed_window));
    }
    return text;
  }

  // A transport failure: what the endpoint did, then (`tally`) the attempts, the time and the
  // limits each attempt had — the limits actually applied, so that a stall ended by the low-speed
  // window is not reported as the attempt timeout.
  absl::Status TransportError(const Transfer& t, const Ending& e, bool tally) const {
    const RetryPolicy& p = options.retry;
    std::string detail;
    // libcurl's own words for its low-speed abort ("Operation too slow. Less than N bytes/sec
    // transferred the last W seconds"), unchanged since 2004.
    if (e.code == CURLE_OPERATION_TIMEDOUT && absl::StrContains(t.error, "too slow")) {
      detail = e.received == 0
                   ? absl::StrCat(t.endpoint, " accepted the connection and sent nothing for ",
                                  Said(p.low_speed_window), ", the low-speed window")
                   : absl::StrCat(t.endpoint, " sent under ", p.low_speed_bytes_per_s, " B/s for ",
                                  Said(p.low_speed_window), ", the low-speed limit (", e.received,
                                  " bytes in the attempt)");
    } else {
      detail =
          absl::StrCat(t.endpoint, ": ", t.error[0] != '\0' ? t.error : curl_easy_strerror(e.code));
    }
    std::string text = absl::StrCat(Name(t), ": ", detail);
    if (tally) {
      absl::StrAppend(&text, " (", t.attempts, " attempt", t.attempts > 1 ? "s" : "", " in ",
                      Said(Since(t.first_start, Clock::now())));
      if (p.give_up_after.count() > 0)
        absl::StrAppend(&text, ", the retry budget ", Said(p.give_up_after));
      absl::StrAppend(&text, "; ", Limits(), ")");
    }
    return e.code == CURLE_OPERATION_TIMEDOUT ? absl::DeadlineExceededError(text)
                                              : absl::UnavailableError(text);
  }

  // The error an attempt ended with; `tally` adds the attempts and the time (the final error).
  absl::Status AttemptError(const Transfer& t, const Ending& e, bool tally) const {
    if (t.too_large || e.code == CURLE_FILESIZE_EXCEEDED) {
      return absl::DataLossError(absl::StrCat(Name(t), ": the response is larger than the ",
                                              t.request.max_response_bytes, " bytes expected"));
    }
    if (t.out_of_memory) {
      return absl::ResourceExhaustedError(
          absl::StrCat(Name(t), ": no memory to hold the response (", t.body.size(),
                       " bytes held, Content-Length ", t.content_length, ")"));
    }
    if (e.status >= 300 || (e.code == CURLE_OK && (e.status < 200 || e.status >= 300))) {
      HttpErrorContext context;
      context.what = Name(t);
      context.attempts = tally ? t.attempts : 1;
      if (tally) context.elapsed = Since(t.first_start, Clock::now());
      context.refused_hint = options.refused_hint;
      context.sent_session_token = t.sent_session_token;
      return HttpError(e.status, t.body, context);
    }
    return TransportError(t, e, tally);
  }

  // Whether an attempt that failed may pass on another: an answered error by its status (its
  // body cut short or not), a transport failure by its kind; a response too large never.
  static bool Retryable(const Transfer& t, const Ending& e) {
    if (t.too_large || t.out_of_memory || e.code == CURLE_FILESIZE_EXCEEDED) return false;
    if (e.status >= 300) return RetryableHttpStatus(e.status);
    return e.code != CURLE_OK && RetryableCurl(e.code);
  }

  void Finish(std::unique_ptr<Transfer> t, absl::StatusOr<HttpResponse> result) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (result.ok()) {
        counts.bytes_received += result->body.size();
        counts.bytes_sent += t->request.body.size();
      } else {
        ++counts.failed;
      }
    }
    t->done(std::move(result));
  }

  void Complete(CURL* easy, CURLcode code) {
    auto it = std::find_if(running.begin(), running.end(),
                           [&](const auto& t) { return t->easy == easy; });
    if (it == running.end()) return;
    std::unique_ptr<Transfer> t = std::move(*it);
    running.erase(it);
    Ending e;
    e.code = code;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &e.status);
    long header_bytes = 0;
    curl_off_t body_bytes = 0;
    curl_easy_getinfo(easy, CURLINFO_HEADER_SIZE, &header_bytes);
    curl_easy_getinfo(easy, CURLINFO_SIZE_DOWNLOAD_T, &body_bytes);
    e.received = header_bytes + body_bytes;
    Release(*t);
    const bool answered_ok = e.code == CURLE_OK && e.status >= 200 && e.status < 300 &&
                             !t->too_large && !t->out_of_memory;
    {
      // The governor hears how the store took it: overrun (503 SlowDown, 429, an attempt that
      // timed out) or served.
      std::lock_guard<std::mutex> lock(mu);
      const Clock::time_point now = Clock::now();
      if (e.status == 503 || e.status == 429 || e.code == CURLE_OPERATION_TIMEDOUT) {
        governor->Throttled(now);
        if (node != nullptr) {
          node->Raise(now);
          node_heard = now;  // its own: heard already
        }
      } else if (answered_ok) {
        governor->Succeeded(now);
        window->Completed(t->attempt_start, now,
                          static_cast<uint64_t>(std::max<int64_t>(0, e.received)));
        counts.in_flight_window_max = std::max(counts.in_flight_window_max, window->size(now));
      }
      counts.throttles = governor->throttles();
      counts.rate_limit_per_s = governor->rate_per_s();
    }
    if (answered_ok) {
      HttpResponse r;
      r.status = e.status;
      r.body = std::move(t->body);
      r.etag = std::move(t->etag);
      r.content_length = t->content_length;
      r.attempts = t->attempts;
      return Finish(std::move(t), std::move(r));
    }
    if (Retryable(*t, e)) {
      const Clock::time_point now = Clock::now();
      const Clock::time_point next = now + Backoff(t->attempts);
      if (MayRetry(*t, next)) {
        if (options.on_retry) {
          options.on_retry(Name(*t), t->attempts, Since(t->first_start, now),
                           AttemptError(*t, e, /*tally=*/false));
        }
        t->not_before = next;
        waiting.push_back(std::move(t));
        return;
      }
    }
    absl::Status error = AttemptError(*t, e, /*tally=*/true);
    Finish(std::move(t), std::move(error));
  }

  void Loop() {
    for (;;) {
      if (Cancelled()) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (stop) break;
        }
        EndAll(absl::CancelledError("interrupted: the request was given up (RetryPolicy::cancel)"));
        curl_multi_poll(multi, nullptr, 0, kCancelCheckMs, nullptr);
        continue;
      }
      std::vector<std::unique_ptr<Transfer>> starting;
      bool stopping = false;
      // When the governor lets the next request start, if it holds one back.
      std::optional<Clock::time_point> admit_at;
      {
        std::lock_guard<std::mutex> lock(mu);
        stopping = stop;
        const auto now = Clock::now();
        // Retries that are due (paced by their backoff, charged to the governor), then new
        // requests as the governor admits them.
        for (auto it = waiting.begin(); !stopping && it != waiting.end();) {
          if ((*it)->not_before > now) {
            ++it;
            continue;
          }
          governor->Charge(now);
          starting.push_back(std::move(*it));
          it = waiting.erase(it);
        }
        HearNodeLocked(now);
        const size_t room = static_cast<size_t>(window->size(now));
        while (!stopping && !admit_at.has_value() && !queued.empty() &&
               running.size() + waiting.size() + starting.size() < room) {
          if ((admit_at = governor->Admit(now))) break;
          starting.push_back(std::move(queued.front()));
          queued.pop_front();
        }
      }
      if (stopping) break;
      for (auto& t : starting) Start(std::move(t));
      int active = 0;
      curl_multi_perform(multi, &active);
      int left = 0;
      bool finished = false;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
        if (msg->msg == CURLMSG_DONE) {
          Complete(msg->easy_handle, msg->data.result);
          finished = true;
        }
      }
      // A finished transfer made room for a queued one: start it now, not after the next wakeup.
      if (finished) continue;
      int wait_ms = options.retry.cancel != nullptr ? kCancelCheckMs : 1000;
      if (admit_at.has_value()) {
        wait_ms = std::min<int>(
            wait_ms,
            static_cast<int>(std::max<int64_t>(
                1, std::chrono::duration_cast<std::chrono::milliseconds>(*admit_at - Clock::now())
                       .count())));
      }
      for (const auto& t : waiting) {
        wait_ms =
            std::min<int>(wait_ms, static_cast<int>(std::max<int64_t>(
                                       0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                              t->not_before - Clock::now())
                                              .count())));
      }
      curl_multi_poll(multi, nullptr, 0, wait_ms, nullptr);
    }
    EndAll(absl::CancelledError("the HTTP client was shut down"));
  }

  bool Cancelled() const { return options.retry.cancel != nullptr && options.retry.cancel->load(); }

  // Ends what runs, waits or is queued with `why` (Cancelled).
  void EndAll(const absl::Status& why) {
    for (auto& t : running) Release(*t);
    std::deque<std::unique_ptr<Transfer>> rest;
    {
      std::lock_guard<std::mutex> lock(mu);
      rest.swap(queued);
    }
    std::vector<std::unique_ptr<Transfer>> ended;
    for (auto* list : {&running, &waiting}) {
      for (auto& t : *list) ended.push_back(std::move(t));
      list->clear();
    }
    for (auto& t : rest) ended.push_back(std::move(t));
    for (auto& t : ended) Finish(std::move(t), why);
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(const Options& options) {
  InitCurlOnce();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->options.max_in_flight = std::max(1, options.max_in_flight);
  impl->options.retry.max_attempts = std::max(1, options.retry.max_attempts);
  RateGovernor::Options g;
  g.max_per_s = std::max(0.0, options.max_requests_per_s);
  impl->governor.emplace(g, Clock::now());
  impl->counts.rate_limit_per_s = impl->governor->rate_per_s();
  // The window opens from max_in_flight up to in_flight_limit; a limit below max_in_flight holds
  // it there (fewer GETs at once, for a fragile store).
  InFlightWindow::Options w;
  w.max = options.in_flight_limit > 0 ? options.in_flight_limit : impl->options.max_in_flight;
  w.min = std::min(impl->options.max_in_flight, w.max);
  impl->window.emplace(w, Clock::now());
  impl->counts.in_flight_window_max = w.min;
  if (!options.node_signal_key.empty()) {
    absl::StatusOr<std::unique_ptr<NodeSignal>> node =
        NodeSignal::Open(options.node_signal_key, options.node_signal_dir);
    if (node.ok()) {
      impl->node = *std::move(node);
      // Push-backs before this client existed are not its to hear.
      impl->node_heard = impl->node->Latest(Clock::now()).value_or(Clock::time_point{});
    } else {
      static std::once_flag warned;
      std::call_once(warned, [&] { DDPIO_LOG(WARNING) << node.status().message(); });
    }
  }
  impl->multi = curl_multi_init();
  if (impl->multi == nullptr) return absl::InternalError("curl_multi_init failed");
  curl_multi_setopt(impl->multi, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(w.max));
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

HttpClient::~HttpClient() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  curl_multi_wakeup(impl_->multi);
  impl_->thread.join();
  curl_multi_cleanup(impl_->multi);
}

void HttpClient::Submit(HttpRequest request, Done done) {
  auto t = std::make_unique<Impl::Transfer>();
  t->request = std::move(request);
  t->done = std::move(done);
  t->endpoint = Endpoint(t->request.url);
  t->sent_session_token = CarriesSessionToken(t->request);
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    stopped = impl_->stop;
    if (!stopped) impl_->queued.push_back(std::move(t));
  }
  if (stopped) {
    t->done(absl::CancelledError("the HTTP client was shut down"));
    return;
  }
  curl_multi_wakeup(impl_->multi);
}

absl::StatusOr<HttpResponse> HttpClient::Execute(HttpRequest request) {
  std::promise<absl::StatusOr<HttpResponse>> promise;
  std::future<absl::StatusOr<HttpResponse>> future = promise.get_future();
  Submit(std::move(request),
         [&promise](absl::StatusOr<HttpResponse> r) { promise.set_value(std::move(r)); });
  return future.get();
}

HttpCounters HttpClient::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counts;
}

}  // namespace ddpio::storage::s3
