// The object store's HTTP engine against a scripted server: retries with backoff on 503/500 and
// dropped connections, a bounded number of them or for a bounded time, each told to a progress
// hook, then an error naming the request and the last status; a response larger than asked for is
// DataLoss, and a server's announcement of terabytes costs no terabytes; a server that accepts and
// never answers, or trickles, ends at the low-speed limit and is reported with the endpoint and the
// limits actually applied; an error document too long to keep is cut and still classified by its
// status; a session token refused with a bare 400 says so; many requests in flight on one thread
// all come back.
#include "ddpio/storage/s3/http_client.h"

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage::s3 {
namespace {

using testing::FakeAnswer;
using testing::FakeHttpServer;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

HttpClient::Options Quick(int attempts = 4) {
  HttpClient::Options o;
  o.retry.max_attempts = attempts;
  o.retry.base_delay = std::chrono::milliseconds(1);
  o.retry.max_delay = std::chrono::milliseconds(5);
  o.retry.attempt_timeout = std::chrono::seconds(2);
  o.retry.connect_timeout = std::chrono::seconds(2);
  return o;
}

// A status's message as a std::string: gtest prints it as text (absl::string_view is not
// std::string_view in this build, and prints as an array of chars).
std::string Message(const absl::Status& s) { return std::string(s.message()); }
template <typename T>
std::string Message(const absl::StatusOr<T>& s) {
  return Message(s.status());
}

HttpRequest Get(const FakeHttpServer& server, const std::string& what = "GET s3://b/k") {
  HttpRequest r;
  r.url = server.url() + "/b/k";
  r.what = what;
  return r;
}

TEST(HttpClient, SlowDownAndServerErrorsAreRetriedThenSucceed) {
  const std::string slow_down =
      "<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>";
  // The dropped connection comes first: on a kept-alive connection libcurl itself would send the
  // request again once, unseen by the client's count.
  FakeHttpServer server(
      {{FakeAnswer{0, "", false, true}}, {503, slow_down}, {500, ""}, {200, "payload"}});
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick()));
  ASSERT_OK_AND_ASSIGN(HttpResponse r, http->Execute(Get(server)));
  EXPECT_EQ(r.body, "payload");
  EXPECT_EQ(r.attempts, 4);
  EXPECT_EQ(server.requests().size(), 4u);
  const HttpCounters c = http->counters();
  EXPECT_EQ(c.requests, 4u);
  EXPECT_EQ(c.retries, 3u);
  EXPECT_EQ(c.failed, 0u);
}

TEST(HttpClient, RetriesRunOutWithAnErrorNamingTheRequestAndTheLastStatus) {
  FakeHttpServer server(
      {{503, "<Error><Code>SlowDown</Code><Message>Please reduce</Message></Error>"}});
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick(3)));
  auto r = http->Execute(Get(server, "GET s3://bucket/train/data.mdb bytes=0-99"));
  EXPECT_CODE(r, kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("GET s3://bucket/train/data.mdb bytes=0-99"));
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP 503 SlowDown: Please reduce"));
  EXPECT_THAT(r.status().message(), HasSubstr("after 3 attempts"));
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_EQ(http->counters().failed, 1u);
}

TEST(HttpClient, ClientErrorsAreNotRetried) {
  FakeHttpServer server({{404, "<Error><Code>NoSuchKey</Code></Error>"}, {200, "late"}});
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick()));
  auto r = http->Execute(Get(server));
  EXPECT_CODE(r, kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("NoSuchKey"));
  EXPECT_EQ(server.requests().size(), 1u);
  FakeHttpServer denied({{403, "<Error><Code>SignatureDoesNotMatch</Code></Error>"}});
  EXPECT_CODE(http->Execute(Get(denied)), kPermissionDenied);
  FakeHttpServer expired({{400, "<Error><Code>ExpiredToken</Code></Error>"}});
  EXPECT_CODE(http->Execute(Get(expired)), kUnauthenticated);
}

TEST(HttpClient, AResponseLargerThanAllowedIsDataLossNotMemory) {
  FakeHttpServer server({{200, std::string(1 << 20, 'x')}});
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick()));
  HttpRequest r = Get(server);
  r.max_response_bytes = 1000;
  auto got = http->Execute(r);
  EXPECT_CODE(got, kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("larger than the 1000 bytes expected"));
}

TEST(HttpClient, AServerThatNeverAnswersEndsWithinTheAttemptTimeouts) {
  FakeHttpServer server(std::vector<FakeAnswer>{FakeAnswer{0, "", true, false}});
  HttpClient::Options o = Quick(2);
  o.retry.attempt_timeout = std::chrono::milliseconds(1500);
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  auto r = http->Execute(Get(server));
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status()) || absl::IsUnavailable(r.status()))
      << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("2 attempts"));
  EXPECT_EQ(server.requests().size(), 2u);
}

// Finding 8: a success announcing 16 TiB within a (huge) limit used to reserve 16 TiB in the
// HTTP thread: std::bad_alloc, SIGABRT. Memory now follows the bytes that arrive.
TEST(HttpClient, AnAnnouncementOfTerabytesAllocatesOnlyWhatArrives) {
  constexpr int64_t k16TiB = int64_t{16} << 40;
  FakeHttpServer server(
      {FakeAnswer{.status = 200, .body = std::string(1024, 'x'), .content_length = k16TiB}});
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick(2)));
  HttpRequest r = Get(server);
  r.max_response_bytes = uint64_t{32} << 40;  // a limit taken from a hostile manifest, say
  auto got = http->Execute(r);
  // 1 KiB came, then the connection closed: a cut transfer, retried, then Unavailable.
  EXPECT_CODE(got, kUnavailable);
  EXPECT_THAT(Message(got), HasSubstr("2 attempts"));
  // Within the usual limit the same announcement ends before a byte is read.
  auto refused = http->Execute(Get(server));
  EXPECT_CODE(refused, kDataLoss);
  EXPECT_THAT(Message(refused), HasSubstr("larger than the 67108864 bytes expected"));
}

TEST(HttpClient, AStreamedBodyWithoutLengthStopsAtTheLimit) {
  FakeHttpServer server(
      {FakeAnswer{.status = 200, .no_content_length = true, .filler_bytes = uint64_t{64} << 20}});
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick()));
  HttpRequest r = Get(server);
  r.max_response_bytes = uint64_t{1} << 20;
  auto got = http->Execute(r);
  EXPECT_CODE(got, kDataLoss);
  EXPECT_THAT(Message(got), HasSubstr("larger than the 1048576 bytes expected"));
  EXPECT_EQ(server.requests().size(), 1u);  // not retried
}

// Finding 10: at 2 bytes/s, over the old limit of 1 byte/s, each attempt ran to its timeout.
TEST(HttpClient, ATrickleEndsAtTheLowSpeedLimitNotTheAttemptTimeout) {
  FakeHttpServer server(
      {FakeAnswer{.status = 200, .body = std::string(1000, 'x'), .bytes_per_s = 2}});
  HttpClient::Options o = Quick(2);
  o.retry.attempt_timeout = std::chrono::seconds(60);
  o.retry.low_speed_bytes_per_s = 1024;
  o.retry.low_speed_window = std::chrono::seconds(1);
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  const auto start = Clock::now();
  auto got = http->Execute(Get(server));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));  // not 2 × 60 s: no hang
  EXPECT_CODE(got, kDeadlineExceeded);
  EXPECT_THAT(Message(got), HasSubstr(absl::StrCat("127.0.0.1:", server.port(), " sent under ")));
  EXPECT_THAT(Message(got), HasSubstr("under 1024 B/s for 1 s, the low-speed limit"));
  EXPECT_EQ(server.requests().size(), 2u);
}

// A large GET on a link shared with many others moves slowly but steadily: found in the cluster
// simulator (8 ranks x 16 GETs of 8 MiB over a 100 Mbit/s store link, ~100 KB/s each), where every
// attempt was cut at the 30 s attempt timeout and sent again from its first byte (1,169 retries,
// 4.5x the bytes). An attempt whose size is known has the time its bytes take at 16 KiB/s more.
TEST(HttpClient, ALargeTransferThatKeepsMovingIsNotCutAtTheAttemptTimeout) {
  const std::string body(48'000, 'x');  // 2 s at 24,000 B/s: twice the attempt timeout
  FakeHttpServer server({FakeAnswer{.status = 200, .body = body, .bytes_per_s = 24'000}});
  HttpClient::Options o = Quick(2);
  o.retry.attempt_timeout = std::chrono::seconds(1);
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  HttpRequest sized = Get(server);
  sized.transfer_bytes = body.size();
  ASSERT_OK_AND_ASSIGN(HttpResponse got, http->Execute(sized));
  EXPECT_EQ(got.body, body);
  EXPECT_EQ(got.attempts, 1) << "cut at the attempt timeout while it moved";
  // Unsized, the attempt timeout alone bounds it (as for a request that may be any size).
  FakeHttpServer again({FakeAnswer{.status = 200, .body = body, .bytes_per_s = 24'000}});
  o.retry.max_attempts = 1;
  ASSERT_OK_AND_ASSIGN(auto strict, HttpClient::Create(o));
  EXPECT_CODE(strict->Execute(Get(again)), kDeadlineExceeded);
}

// Finding 11: the outage a request rides out is a time, whatever max_attempts says.
TEST(HttpClient, ARetryBudgetRidesOutAnOutageLongerThanTheAttempts) {
  std::vector<FakeAnswer> answers(20, FakeAnswer{.status = 503, .body = ""});
  answers.push_back({200, "back"});
  FakeHttpServer server(answers);
  HttpClient::Options o = Quick(2);
  o.retry.give_up_after = std::chrono::seconds(60);
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  ASSERT_OK_AND_ASSIGN(HttpResponse r, http->Execute(Get(server)));
  EXPECT_EQ(r.body, "back");
  EXPECT_EQ(r.attempts, 21);
}

TEST(HttpClient, ARetryBudgetEndsTheRetriesWhenItIsSpent) {
  FakeHttpServer server({{503, "<Error><Code>SlowDown</Code></Error>"}});
  HttpClient::Options o = Quick(2);
  o.retry.give_up_after = std::chrono::milliseconds(300);
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  const auto start = Clock::now();
  auto got = http->Execute(Get(server));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));  // no hang
  EXPECT_CODE(got, kUnavailable);
  EXPECT_THAT(Message(got), HasSubstr("HTTP 503 SlowDown (after "));
  EXPECT_GT(server.requests().size(), 2u);  // the budget, not max_attempts, ended it
}

TEST(HttpClient, EachRetryIsToldToTheProgressHook) {
  FakeHttpServer server({{503, "<Error><Code>SlowDown</Code><Message>Reduce</Message></Error>"},
                         {500, ""},
                         {200, "ok"}});
  struct Call {
    std::string what;
    int attempt;
    std::chrono::milliseconds waited;
    absl::Status last;
  };
  std::mutex mu;
  std::vector<Call> calls;  // guarded by mu
  HttpClient::Options o = Quick();
  o.on_retry = [&](const std::string& what, int attempt, std::chrono::milliseconds waited,
                   const absl::Status& last) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back({what, attempt, waited, last});
  };
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  ASSERT_OK_AND_ASSIGN(HttpResponse r, http->Execute(Get(server, "GET s3://b/k bytes=0-9")));
  EXPECT_EQ(r.attempts, 3);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].what, "GET s3://b/k bytes=0-9");
  EXPECT_EQ(calls[0].attempt, 1);
  EXPECT_EQ(calls[1].attempt, 2);
  EXPECT_LE(calls[0].waited, calls[1].waited);
  EXPECT_CODE(calls[0].last, kUnavailable);
  EXPECT_EQ(calls[0].last.message(), "GET s3://b/k bytes=0-9: HTTP 503 SlowDown: Reduce");
  EXPECT_EQ(calls[1].last.message(), "GET s3://b/k bytes=0-9: HTTP 500");
}

// Finding 10: a caller answering Ctrl-C (the Python package, while a dataset opens) raises
// RetryPolicy::cancel: a request riding out an outage — here retried, then hanging on a server that
// accepts and never answers, with a budget of a minute — ends at once with Cancelled, and so does
// every later one, instead of when the budget is spent.
TEST(HttpClient, RaisingTheCancelFlagEndsARequestRidingOutAnOutageAtOnce) {
  FakeHttpServer server({{503, ""}, FakeAnswer{.hang = true}});
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  HttpClient::Options o = Quick();
  o.retry.give_up_after = std::chrono::seconds(60);
  o.retry.attempt_timeout = std::chrono::seconds(60);
  o.retry.cancel = cancel;
  std::promise<void> retried;
  std::atomic<bool> told{false};
  o.on_retry = [&](const std::string&, int, std::chrono::milliseconds, const absl::Status&) {
    if (!told.exchange(true)) retried.set_value();
  };
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  std::promise<absl::StatusOr<HttpResponse>> done;
  const auto start = std::chrono::steady_clock::now();
  http->Submit(Get(server), [&](absl::StatusOr<HttpResponse> r) { done.set_value(std::move(r)); });
  retried.get_future().wait();  // the first attempt failed: the request is retrying
  cancel->store(true);
  std::future<absl::StatusOr<HttpResponse>> result = done.get_future();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the request outlived its cancel";
  const absl::StatusOr<HttpResponse> r = result.get();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_CODE(r.status(), kCancelled);
  EXPECT_THAT(Message(r.status()), ::testing::HasSubstr("interrupted"));
  EXPECT_CODE(http->Execute(Get(server)).status(), kCancelled);  // later requests too
}

// Finding 12: the silence was ended by the low-speed window (10 s) and reported as "30000 ms per
// attempt" — the configured attempt timeout — without the endpoint or the time spent.
TEST(HttpClient, ASilentServerIsReportedWithTheEndpointAndTheLimitsApplied) {
  FakeHttpServer server(std::vector<FakeAnswer>{FakeAnswer{.hang = true}});
  HttpClient::Options o = Quick(2);
  o.retry.attempt_timeout = std::chrono::seconds(5);
  o.retry.low_speed_window = std::chrono::seconds(1);
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  auto got = http->Execute(Get(server));
  EXPECT_CODE(got, kDeadlineExceeded);
  const std::string said = Message(got);
  EXPECT_THAT(said, HasSubstr(absl::StrCat("GET s3://b/k: 127.0.0.1:", server.port(),
                                           " accepted the connection and sent nothing for 1 s")));
  EXPECT_THAT(said, HasSubstr("(2 attempts in "));
  EXPECT_THAT(said, HasSubstr("each attempt is allowed 5 s in all, 2 s to connect, and ends "
                              "under 1024 B/s for 1 s"));
  EXPECT_THAT(said, Not(HasSubstr("5000 ms per attempt")));
}

// Finding 13: an error document over 64 KiB was DataLoss, so a 503 was not retried and its error
// did not name the status.
TEST(HttpClient, ALongErrorDocumentIsCutAndClassifiedByItsStatus) {
  const std::string slow_down =
      "<Error><Code>SlowDown</Code><Message>Reduce</Message></Error>" + std::string(200 << 10, ' ');
  FakeHttpServer server({{503, slow_down}, {200, "ok"}});
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick()));
  HttpRequest r = Get(server);
  r.max_response_bytes = 10;  // a small range
  r.headers.push_back("Range: bytes=0-9");
  ASSERT_OK_AND_ASSIGN(HttpResponse ok, http->Execute(r));
  EXPECT_EQ(ok.body, "ok");
  EXPECT_EQ(ok.attempts, 2);

  FakeHttpServer always({{503, slow_down}});
  HttpRequest again = Get(always);
  again.max_response_bytes = 10;
  auto got = http->Execute(again);
  EXPECT_CODE(got, kUnavailable);
  EXPECT_THAT(Message(got), HasSubstr("HTTP 503 SlowDown: Reduce (after 4 attempts"));

  // An error announcing a gigabyte and sending a few bytes is still its status, not retried.
  FakeHttpServer missing({FakeAnswer{.status = 404,
                                     .body = "<Error><Code>NoSuchKey</Code></Error>",
                                     .content_length = int64_t{1} << 30}});
  HttpRequest lost = Get(missing);
  lost.max_response_bytes = 10;
  auto gone = http->Execute(lost);
  EXPECT_CODE(gone, kNotFound);
  EXPECT_THAT(Message(gone), HasSubstr("HTTP 404 NoSuchKey"));
  EXPECT_EQ(missing.requests().size(), 1u);
}

// Finding 13: Ceph's gateway refuses a session token it cannot decode with a bare 400
// InvalidArgument; the error now carries the credentials hint.
TEST(HttpClient, ASessionTokenRefusedWithABare400SaysItIsTheCredentials) {
  const std::string ceph =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InvalidArgument</Code>"
      "<BucketName>b</BucketName><RequestId>tx0000012f1c4e6-default</RequestId>"
      "<HostId>1f10-default-default</HostId></Error>";
  FakeHttpServer server({{400, ceph}});
  HttpClient::Options o = Quick();
  o.refused_hint = "Check the session token";
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  HttpRequest r = Get(server);
  r.headers.push_back("x-amz-security-token: mangled");
  auto got = http->Execute(r);
  EXPECT_CODE(got, kUnauthenticated);
  EXPECT_THAT(Message(got), HasSubstr("HTTP 400 InvalidArgument. Check the session token"));
  // Without a token, the same answer is only a bad request.
  auto plain = http->Execute(Get(server));
  EXPECT_CODE(plain, kInvalidArgument);
  EXPECT_THAT(Message(plain), Not(HasSubstr("Check the session token")));
}

TEST(HttpClient, OnlyThe400sAboutCredentialsAreCalledRefusals) {
  auto doc = [](const std::string& code, const std::string& message = "",
                const std::string& argument = "") {
    return absl::StrCat(
        "<Error><Code>", code, "</Code>",
        message.empty() ? "" : absl::StrCat("<Message>", message, "</Message>"),
        argument.empty() ? "" : absl::StrCat("<ArgumentName>", argument, "</ArgumentName>"),
        "</Error>");
  };
  EXPECT_TRUE(RefusesCredentials(400, doc("AuthorizationHeaderMalformed", "bad region"), false));
  EXPECT_TRUE(RefusesCredentials(400, doc("InvalidToken"), false));
  EXPECT_TRUE(RefusesCredentials(400, doc("ExpiredToken"), false));
  EXPECT_TRUE(RefusesCredentials(
      400, doc("InvalidArgument", "Authorization header is invalid", "Authorization"), false));
  EXPECT_TRUE(RefusesCredentials(
      400, doc("InvalidArgument", "The security token is malformed", "x-amz-security-token"),
      false));
  EXPECT_TRUE(RefusesCredentials(400, doc("InvalidArgument"), /*sent_session_token=*/true));
  EXPECT_TRUE(RefusesCredentials(403, doc("SignatureDoesNotMatch"), false));
  EXPECT_FALSE(RefusesCredentials(400, doc("InvalidArgument"), /*sent_session_token=*/false));
  EXPECT_FALSE(RefusesCredentials(
      400, doc("InvalidArgument", "max-keys must be an integer", "max-keys"), true));
  EXPECT_FALSE(RefusesCredentials(400, doc("InvalidPart"), true));
  EXPECT_FALSE(RefusesCredentials(400, doc("MalformedXML"), true));
  EXPECT_FALSE(RefusesCredentials(404, doc("NoSuchKey"), true));

  HttpErrorContext context;
  context.what = "GET s3://b/k";
  context.attempts = 3;
  context.elapsed = std::chrono::milliseconds(2500);
  context.refused_hint = "Check the keys";
  const absl::Status s = HttpError(400, doc("AuthorizationHeaderMalformed", "bad region"), context);
  EXPECT_CODE(s, kUnauthenticated);
  EXPECT_EQ(s.message(),
            "GET s3://b/k: HTTP 400 AuthorizationHeaderMalformed: bad region (after 3 attempts in "
            "2.5 s). Check the keys");
}

TEST(HttpClient, NothingListeningIsUnavailableAfterTheAttempts) {
  int port = 0;
  {
    FakeHttpServer gone({{200, ""}});
    port = gone.port();
  }
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick(3)));
  HttpRequest r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + "/b/k";
  r.what = "GET s3://b/k";
  auto got = http->Execute(r);
  EXPECT_CODE(got, kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("3 attempts"));
  EXPECT_THAT(Message(got), HasSubstr(absl::StrCat("GET s3://b/k: 127.0.0.1:", port)));
}

TEST(HttpClient, ManyRequestsInFlightAllComeBack) {
  FakeHttpServer server({{200, "ok"}});
  HttpClient::Options o = Quick();
  o.max_in_flight = 8;
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  std::atomic<int> ok{0}, done{0};
  std::promise<void> all;
  constexpr int kRequests = 200;
  for (int i = 0; i < kRequests; ++i) {
    http->Submit(Get(server), [&](absl::StatusOr<HttpResponse> r) {
      if (r.ok() && r->body == "ok") ++ok;
      if (++done == kRequests) all.set_value();
    });
  }
  all.get_future().wait();
  EXPECT_EQ(ok.load(), kRequests);
  EXPECT_EQ(http->counters().requests, static_cast<uint64_t>(kRequests));
}

TEST(HttpClient, DestroyingTheClientCancelsWhatIsPending) {
  FakeHttpServer server(std::vector<FakeAnswer>{FakeAnswer{0, "", true, false}});
  std::promise<absl::Status> result;
  {
    ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(Quick()));
    http->Submit(Get(server),
                 [&](absl::StatusOr<HttpResponse> r) { result.set_value(r.status()); });
    while (server.requests().empty()) std::this_thread::yield();
  }
  EXPECT_CODE(result.get_future().get(), kCancelled);
}

// `n` GETs of the server's object submitted at once; their answers to come.
std::vector<std::future<absl::StatusOr<HttpResponse>>> SubmitMany(HttpClient& http,
                                                                  const FakeHttpServer& server,
                                                                  int n) {
  std::vector<std::future<absl::StatusOr<HttpResponse>>> pending;
  for (int i = 0; i < n; ++i) {
    auto promise = std::make_shared<std::promise<absl::StatusOr<HttpResponse>>>();
    pending.push_back(promise->get_future());
    http.Submit(Get(server),
                [promise](absl::StatusOr<HttpResponse> r) { promise->set_value(std::move(r)); });
  }
  return pending;
}

// The governor in the client: 503 SlowDowns slow it down and every request still completes; a cap
// is kept (a lower bound on the time taken: a client that does not pace finishes far sooner).
TEST(HttpClient, SlowDownsEngageTheGovernorAndNothingIsLost) {
  const std::string slow_down = "<Error><Code>SlowDown</Code></Error>";
  std::vector<FakeAnswer> answers(12, FakeAnswer{503, slow_down});
  answers.push_back({200, "ok"});
  FakeHttpServer server(answers);
  HttpClient::Options o = Quick();
  o.retry.max_attempts = 20;
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  EXPECT_EQ(http->counters().rate_limit_per_s, 0.0) << "unlimited before the store pushes back";
  std::vector<std::future<absl::StatusOr<HttpResponse>>> pending = SubmitMany(*http, server, 8);
  for (auto& f : pending) {
    absl::StatusOr<HttpResponse> r = f.get();
    ASSERT_OK(r.status());
    EXPECT_EQ(r->body, "ok");
  }
  const HttpCounters c = http->counters();
  EXPECT_EQ(c.throttles, 12u);
  EXPECT_GT(c.rate_limit_per_s, 0.0) << "the governor limits the rate now";
}

// Clients of one node and store given the same key back off together: a push-back one of them
// hears slows the other down, though the store said nothing to it; a client of another store (key)
// goes on unlimited.
TEST(HttpClient, APushBackOneClientOfTheNodeHearsSlowsTheOthersDown) {
  testing::TempDir dir;
  HttpClient::Options o = Quick();
  o.retry.max_attempts = 20;
  o.node_signal_key = "http://store:7480";
  o.node_signal_dir = dir.path().string();
  ASSERT_OK_AND_ASSIGN(auto pushed, HttpClient::Create(o));
  ASSERT_OK_AND_ASSIGN(auto peer, HttpClient::Create(o));
  HttpClient::Options elsewhere_options = o;
  elsewhere_options.node_signal_key = "http://another-store:7480";
  ASSERT_OK_AND_ASSIGN(auto elsewhere, HttpClient::Create(elsewhere_options));
  FakeHttpServer ok({{200, "ok"}});
  for (auto& f : SubmitMany(*peer, ok, 4)) ASSERT_OK(f.get().status());
  EXPECT_EQ(peer->counters().rate_limit_per_s, 0.0) << "unlimited before any push-back";

  std::vector<FakeAnswer> answers(3, FakeAnswer{503, "<Error><Code>SlowDown</Code></Error>"});
  answers.push_back({200, "ok"});
  FakeHttpServer slow(answers);
  for (auto& f : SubmitMany(*pushed, slow, 1)) ASSERT_OK(f.get().status());
  EXPECT_EQ(pushed->counters().throttles, 3u);

  for (auto& f : SubmitMany(*peer, ok, 1)) ASSERT_OK(f.get().status());
  for (auto& f : SubmitMany(*elsewhere, ok, 1)) ASSERT_OK(f.get().status());
  EXPECT_GT(peer->counters().rate_limit_per_s, 0.0) << "the node's push-back slows it too";
  EXPECT_EQ(peer->counters().throttles, 0u) << "not a push-back of its own";
  EXPECT_EQ(elsewhere->counters().rate_limit_per_s, 0.0) << "another store's clients go on";
}

TEST(HttpClient, ARequestRateCapIsKept) {
  FakeHttpServer server({{200, "ok"}});
  HttpClient::Options o = Quick();
  o.max_requests_per_s = 40;
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  const auto start = std::chrono::steady_clock::now();
  for (auto& f : SubmitMany(*http, server, 21)) ASSERT_OK(f.get().status());
  // 40 a second, a burst of 2: the last of 21 starts no sooner than 19/40 s after the first.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(470));
  EXPECT_EQ(http->counters().rate_limit_per_s, 40.0);
}

// An in-flight limit below max_in_flight holds the client at that many (DDPIO_S3_MAX_IN_FLIGHT=4):
// 8 requests to a server that never answers, each ending at its attempt timeout, go out in two
// waves of 4, so the last ends no sooner than two timeouts after the first starts (with 8 at once,
// after one). Without a limit the window starts at max_in_flight.
TEST(HttpClient, AnInFlightLimitBelowTheFloorHoldsTheClientThere) {
  FakeAnswer hang;
  hang.hang = true;
  FakeHttpServer server({hang});
  HttpClient::Options o = Quick(/*attempts=*/1);
  o.retry.attempt_timeout = std::chrono::milliseconds(400);
  o.max_in_flight = 16;
  o.in_flight_limit = 4;
  ASSERT_OK_AND_ASSIGN(auto http, HttpClient::Create(o));
  EXPECT_EQ(http->counters().in_flight_window_max, 4);
  const auto start = Clock::now();
  for (auto& f : SubmitMany(*http, server, 8)) EXPECT_FALSE(f.get().ok()) << "never answered";
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(790)) << "two waves of 4";
  EXPECT_EQ(server.requests().size(), 8u);
  HttpClient::Options floor = Quick();
  floor.max_in_flight = 16;
  ASSERT_OK_AND_ASSIGN(auto fixed, HttpClient::Create(floor));
  EXPECT_EQ(fixed->counters().in_flight_window_max, 16);
  floor.in_flight_limit = 128;
  ASSERT_OK_AND_ASSIGN(auto open, HttpClient::Create(floor));
  EXPECT_EQ(open->counters().in_flight_window_max, 16)
      << "it opens from the floor as requests succeed";
}

}  // namespace
}  // namespace ddpio::storage::s3
