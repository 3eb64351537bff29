// How long reads of a dataset in an object store ride out a failing store (round 3, finding 11):
// the budget is a setting (DDPIO_S3_OUTAGE_SECONDS, checked), and a job's timeout bounds it, so a
// rank retrying a dead store ends within it instead of outlasting the peers waiting for it. Against
// a scripted server answering 503 to everything.
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/storage/dataset_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_http_server.h"
#include "tests/support/status_matchers.h"

namespace ddpio::storage {
namespace {

using ::testing::HasSubstr;

// The process's S3 settings for one test: the fake server and test keys; restored after.
class StoreEnvironment {
 public:
  explicit StoreEnvironment(const std::string& endpoint) {
    Set("AWS_ENDPOINT_URL", endpoint);
    Set("AWS_ACCESS_KEY_ID", "test-key");
    Set("AWS_SECRET_ACCESS_KEY", "test-secret");
  }
  ~StoreEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value.has_value()) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  void Set(const std::string& name, const std::string& value) {
    if (saved_.count(name) == 0) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

const char kSlowDown[] = "<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>";

TEST(RemoteRetry, AnOutageSettingThatIsNotADurationIsRefusedNamingIt) {
  testing::FakeHttpServer server({{503, kSlowDown}});
  StoreEnvironment env(server.url());
  for (const char* bad : {"-1", "0", "soon", "9999999999"}) {
    env.Set("DDPIO_S3_OUTAGE_SECONDS", bad);
    auto opened = DatasetReader::Open("s3://bucket/train");
    EXPECT_CODE(opened, kInvalidArgument) << bad;
    EXPECT_THAT(std::string(opened.status().message()),
                HasSubstr(absl::StrCat("DDPIO_S3_OUTAGE_SECONDS=", bad)));
  }
  EXPECT_TRUE(server.requests().empty()) << "the store was asked before the setting was checked";
}

// A store that answers 503 to everything: reads keep trying for the outage budget, a job's
// timeout (store_deadline) cuts that short, and the error names the store and the time spent.
TEST(RemoteRetry, AJobsTimeoutBoundsHowLongAFailingStoreIsRetried) {
  testing::FakeHttpServer server({{503, kSlowDown}});
  StoreEnvironment env(server.url());
  env.Set("DDPIO_S3_OUTAGE_SECONDS", "600");
  ReaderOptions o;
  o.store_deadline = std::chrono::seconds(2);
  o.remote.retry.base_delay = std::chrono::milliseconds(20);
  o.remote.retry.max_delay = std::chrono::milliseconds(200);
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
