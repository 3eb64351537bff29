// How long reads of a dataset in an object store ride out a failing store (round 3, finding 11):
// the budget is a setting (DDPIO_S3_OUTAGE_SECONDS, checked), and a job's timeout bounds it, so a
// rank retrying a dead store ends within it instead of outlasting the peers waiting for it. Against
// a scripted server answering 503 to everything; the settings resolved from an environment of the
// test's own (store_settings.h), never this process's.
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/common/environment.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/store_settings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/status_matchers.h"

namespace ddpio::storage {
namespace {

using ::testing::HasSubstr;

// The environment of a process that reaches a store at `endpoint` with test keys, plus `more`: a
// map of the test's own, so that no variable of this process is read or changed.
Environment StoreEnvironment(const std::string& endpoint, const Environment& more = {}) {
  Environment env = {{"HOME", "/nonexistent"},
                     {"AWS_ENDPOINT_URL", endpoint},
                     {"AWS_ACCESS_KEY_ID", "test-key"},
                     {"AWS_SECRET_ACCESS_KEY", "test-secret"}};
  for (const auto& [name, value] : more) env[name] = value;
  return env;
}

const char kSlowDown[] = "<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>";

TEST(RemoteRetry, AnOutageSettingThatIsNotADurationIsRefusedNamingIt) {
  for (const char* bad : {"-1", "0", "soon", "9999999999"}) {
    auto resolved = ResolveStoreSettings(
        StoreEnvironment("http://127.0.0.1:1", {{"DDPIO_S3_OUTAGE_SECONDS", bad}}));
    EXPECT_CODE(resolved, kInvalidArgument) << bad;
    EXPECT_THAT(std::string(resolved.status().message()),
                HasSubstr(absl::StrCat("DDPIO_S3_OUTAGE_SECONDS=", bad)));
  }
}

// A store that answers 503 to everything: reads keep trying for the outage budget, a job's
// timeout (store_deadline) cuts that short, and the error names the store and the time spent.
TEST(RemoteRetry, AJobsTimeoutBoundsHowLongAFailingStoreIsRetried) {
  testing::FakeHttpServer server({{503, kSlowDown}});
  ASSERT_OK_AND_ASSIGN(
      StoreSettings settings,
      ResolveStoreSettings(StoreEnvironment(server.url(), {{"DDPIO_S3_OUTAGE_SECONDS", "600"}})));
  ASSERT_EQ(settings.remote.retry.give_up_after, std::chrono::minutes(10));
  settings.remote.retry.base_delay = std::chrono::milliseconds(20);
  settings.remote.retry.max_delay = std::chrono::milliseconds(200);
  ReaderOptions o;
  o.store_settings = settings;
  o.store_deadline = std::chrono::seconds(2);
  const auto start = std::chrono::steady_clock::now();
  auto opened = DatasetReader::Open("s3://bucket/train", o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_CODE(opened, kUnavailable);
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr("HTTP 503 SlowDown"));
  EXPECT_GT(server.requests().size(), 3u) << "the 503s were not retried within the deadline";
  EXPECT_LT(seconds, 60.0) << "the job's timeout did not bound the retries (600 s asked)";
}

}  // namespace
}  // namespace ddpio::storage
