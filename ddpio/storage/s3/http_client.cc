#include "ddpio/storage/s3/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ddpio/storage/s3/s3_xml.h"

namespace ddpio::storage::s3 {
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

bool RetryableHttpStatus(long status) { return status >= 500 || status == 429 || status == 408; }

absl::Status HttpError(long status, const std::string& body, const std::string& what, int attempts,
                       const std::string& refused_hint) {
  const std::string code = XmlText(body, "Code"), message = XmlText(body, "Message");
  std::string detail = absl::StrCat("HTTP ", status);
  if (!code.empty()) absl::StrAppend(&detail, " ", code);
  if (!message.empty()) absl::StrAppend(&detail, ": ", message.substr(0, 300));
  std::string text = absl::StrCat(
      what, ": ", detail, attempts > 1 ? absl::StrCat(" (after ", attempts, " attempts)") : "");
  const bool token_refused = status == 400 && (code == "ExpiredToken" || code == "InvalidToken" ||
                                               code == "InvalidAccessKeyId");
  if ((status == 401 || status == 403 || token_refused) && !refused_hint.empty())
    absl::StrAppend(&text, ". ", refused_hint);
  if (status == 404) return absl::NotFoundError(text);
  if (status == 403) return absl::PermissionDeniedError(text);
  if (status == 401 || token_refused) return absl::UnauthenticatedError(text);
  if (status == 416) return absl::OutOfRangeError(text);
  if (RetryableHttpStatus(status)) return absl::UnavailableError(text);
  return absl::InvalidArgumentError(text);
}

struct HttpClient::Impl {
  struct Transfer {
    HttpRequest request;
    Done done;
    int attempts = 0;
    Clock::time_point not_before;
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::string body;  // the response
    std::string etag;
    int64_t content_length = -1;
    size_t sent = 0;  // of request.body
    bool too_large = false;
    char error[CURL_ERROR_SIZE] = {};
  };

  Options options;
  CURLM* multi = nullptr;
  std::thread thread;

  std::mutex mu;
  std::deque<std::unique_ptr<Transfer>> queued;  // guarded by mu
  bool stop = false;                             // guarded by mu
  HttpCounters counts;                           // guarded by mu

  // The thread's own.
  std::vector<std::unique_ptr<Transfer>> waiting;  // retries not due yet
  std::vector<std::unique_ptr<Transfer>> running;
  std::mt19937_64 random{std::random_device{}()};

  static size_t Write(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t bytes = size * n;
    if (t->body.size() + bytes > Limit(*t)) {
      t->too_large = true;
      return 0;  // aborts the transfer
    }
    // One allocation of the announced size, not a doubling series of copies (a record of
    // 100 KB arrives in ~16 KB writes).
    if (t->body.empty() && t->content_length > 0)
      t->body.reserve(static_cast<size_t>(t->content_length));
    t->body.append(data, bytes);
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
    if (absl::StartsWithIgnoreCase(line, "etag:")) {
      t->etag = std::string(absl::StripAsciiWhitespace(line.substr(5)));
    } else if (absl::StartsWithIgnoreCase(line, "content-length:")) {
      int64_t v = -1;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &v) && v >= 0)
        t->content_length = v;
      // Announced larger than allowed: ended before a byte of it arrives (a HEAD's length is
      // the object's, not a body).
      if (t->request.method != "HEAD" && t->content_length > 0 &&
          static_cast<uint64_t>(t->content_length) > Limit(*t)) {
        t->too_large = true;
        return 0;
      }
    }
    return size * n;
  }
  // The bytes a response body may have: the request's limit for a success; an error document
  // (S3's XML, whose Code the error quotes) gets at least 64 KiB, however small the range asked.
  static uint64_t Limit(const Transfer& t) {
    long status = 0;
    curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
    const bool success = status >= 200 && status < 300;
    return success ? t.request.max_response_bytes
                   : std::max<uint64_t>(t.request.max_response_bytes, 64 << 10);
  }

  void Start(std::unique_ptr<Transfer> t) {
    t->body.clear();
    t->etag.clear();
    t->content_length = -1;
    t->sent = 0;
    t->too_large = false;
    t->error[0] = '\0';
    ++t->attempts;
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
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(options.retry.attempt_timeout.count()));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options.retry.connect_timeout.count()));
    // A transfer that stalls (an endpoint that accepts and never answers) ends long before the
    // attempt's timeout: under 1 byte/s for 10 s.
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(std::max<int64_t>(
                         1, std::min<int64_t>(10, options.retry.attempt_timeout.count() / 1000))));
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

  std::chrono::milliseconds Backoff(int attempts) {
    const int64_t cap = options.retry.max_delay.count();
    const int64_t exp = options.retry.base_delay.count() << std::min(attempts - 1, 20);
    std::uniform_int_distribution<int64_t> pick(0, std::max<int64_t>(1, std::min(cap, exp)));
    return std::chrono::milliseconds(pick(random));  // full jitter
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
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    Release(*t);
    const std::string& what = t->request.what.empty() ? t->request.url : t->request.what;
    if (t->too_large || code == CURLE_FILESIZE_EXCEEDED) {
      return Finish(std::move(t), absl::DataLossError(absl::StrCat(
                                      what, ": the response is larger than the ",
                                      t->request.max_response_bytes, " bytes expected")));
    }
    const bool retry_transport = code != CURLE_OK && RetryableCurl(code);
    const bool retry_status = code == CURLE_OK && RetryableHttpStatus(status);
    if ((retry_transport || retry_status) && t->attempts < options.retry.max_attempts) {
      t->not_before = Clock::now() + Backoff(t->attempts);
      waiting.push_back(std::move(t));
      return;
    }
    if (code != CURLE_OK) {
      const std::string detail = t->error[0] != '\0' ? t->error : curl_easy_strerror(code);
      const std::string text = absl::StrCat(
          what, ": ", detail, " (", options.retry.attempt_timeout.count(), " ms per attempt, ",
          t->attempts, " attempt", t->attempts > 1 ? "s" : "", ")");
      return Finish(std::move(t), code == CURLE_OPERATION_TIMEDOUT
                                      ? absl::DeadlineExceededError(text)
                                      : absl::UnavailableError(text));
    }
    if (status < 200 || status >= 300)
      return Finish(std::move(t),
                    HttpError(status, t->body, what, t->attempts, options.refused_hint));
    HttpResponse r;
    r.status = status;
    r.body = std::move(t->body);
    r.etag = std::move(t->etag);
    r.content_length = t->content_length;
    r.attempts = t->attempts;
    Finish(std::move(t), std::move(r));
  }

  void Loop() {
    for (;;) {
      std::vector<std::unique_ptr<Transfer>> starting;
      bool stopping = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        stopping = stop;
        const size_t room = static_cast<size_t>(options.max_in_flight);
        while (!stopping && !queued.empty() &&
               running.size() + waiting.size() + starting.size() < room) {
          starting.push_back(std::move(queued.front()));
          queued.pop_front();
        }
      }
      if (stopping) break;
      const auto now = Clock::now();
      for (auto it = waiting.begin(); it != waiting.end();) {
        if ((*it)->not_before <= now) {
          starting.push_back(std::move(*it));
          it = waiting.erase(it);
        } else {
          ++it;
        }
      }
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
      int wait_ms = 1000;
      for (const auto& t : waiting) {
        wait_ms =
            std::min<int>(wait_ms, static_cast<int>(std::max<int64_t>(
                                       0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                              t->not_before - Clock::now())
                                              .count())));
      }
      curl_multi_poll(multi, nullptr, 0, wait_ms, nullptr);
    }
    // Cancelled: what runs, waits or is queued gets its answer.
    for (auto& t : running) Release(*t);
    std::deque<std::unique_ptr<Transfer>> rest;
    {
      std::lock_guard<std::mutex> lock(mu);
      rest.swap(queued);
    }
    for (auto& t : running) t->done(absl::CancelledError("the HTTP client was shut down"));
    for (auto& t : waiting) t->done(absl::CancelledError("the HTTP client was shut down"));
    for (auto& t : rest) t->done(absl::CancelledError("the HTTP client was shut down"));
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(const Options& options) {
  InitCurlOnce();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->options.max_in_flight = std::max(1, options.max_in_flight);
  impl->options.retry.max_attempts = std::max(1, options.retry.max_attempts);
  impl->multi = curl_multi_init();
  if (impl->multi == nullptr) return absl::InternalError("curl_multi_init failed");
  curl_multi_setopt(impl->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                    static_cast<long>(impl->options.max_in_flight));
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
