// The object store's HTTP engine against a scripted server: retries with backoff on 503/500 and
// dropped connections, a bounded number of them, then an error naming the request and the last
// status; a response larger than asked for is DataLoss; a server that accepts and never answers
// ends within the attempt's timeout; many requests in flight on one thread all come back.
#include "ddpio/storage/s3/http_client.h"

#include <atomic>
#include <future>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/status_matchers.h"

namespace ddpio::storage::s3 {
namespace {

using testing::FakeAnswer;
using testing::FakeHttpServer;
using ::testing::HasSubstr;

HttpClient::Options Quick(int attempts = 4) {
  HttpClient::Options o;
  o.retry.max_attempts = attempts;
  o.retry.base_delay = std::chrono::milliseconds(1);
  o.retry.max_delay = std::chrono::milliseconds(5);
  o.retry.attempt_timeout = std::chrono::seconds(2);
  o.retry.connect_timeout = std::chrono::seconds(2);
  return o;
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

}  // namespace
}  // namespace ddpio::storage::s3
