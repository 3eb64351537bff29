// The fixture of the tests that run the `ddpio` program against a real S3 server (ctest label s3):
// a fresh bucket, and a small converted dataset (4 classes x 15 synthetic photos of 48 px: 60
// records) to upload to `url_`. Skips without a gateway, or fails when one is required.
#ifndef DDPIO_TESTS_SUPPORT_S3_CLI_FIXTURE_H_
#define DDPIO_TESTS_SUPPORT_S3_CLI_FIXTURE_H_

#include <unistd.h>

#include <string>

#include "ddpio/common/environment.h"
#include "ddpio/storage/s3/s3_client.h"
#include "gtest/gtest.h"
#include "tests/support/s3_gateway.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio::testing {

class S3CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DDPIO_SKIP_WITHOUT_S3();
    bucket_ = "ddpio-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++);
    auto config = storage::s3::S3ConfigFromEnvironment(CurrentEnvironment());
    ASSERT_TRUE(config.ok()) << config.status();
    auto s3 = storage::s3::S3Client::Create(*config);
    ASSERT_TRUE(s3.ok()) << s3.status();
    const absl::Status made = (*s3)->CreateBucket(bucket_);
    ASSERT_TRUE(made.ok()) << made;
    ASSERT_EQ(RunDdpio({"synth", "--out", dir_.Sub("src"), "--classes", "4", "--per-class", "15",
                        "--size", "48", "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(RunDdpio({"convert", "--src", dir_.Sub("src"), "--out", dir_.Sub("db"), "--quiet"})
                  .exit_code,
              0);
    url_ = "s3://" + bucket_ + "/train";
  }
  static constexpr int kRecords = 60;
  inline static int counter_ = 0;
  TempDir dir_;
  std::string bucket_, url_;
};

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_S3_CLI_FIXTURE_H_
