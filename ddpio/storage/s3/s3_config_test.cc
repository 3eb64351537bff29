// Object-store configuration as the AWS tools read it: s3:// URLs, the environment before the
// shared files, profiles, endpoints; secrets never in what is said.
#include "ddpio/storage/s3/s3_config.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage::s3 {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(S3Url, BucketsAndPrefixes) {
  ASSERT_OK_AND_ASSIGN(S3Url u, ParseS3Url("s3://my-bucket/datasets/train/"));
  EXPECT_EQ(u.bucket, "my-bucket");
  EXPECT_EQ(u.prefix, "datasets/train");
  EXPECT_EQ(u.Key("data.mdb"), "datasets/train/data.mdb");
  EXPECT_EQ(u.ToString(), "s3://my-bucket/datasets/train");
  ASSERT_OK_AND_ASSIGN(S3Url root, ParseS3Url("s3://bucket"));
  EXPECT_EQ(root.Key("x"), "x");
  EXPECT_TRUE(IsS3Url("s3://b/x"));
  EXPECT_FALSE(IsS3Url("/data/train.lmdb"));
  for (const char* bad : {"s3://", "s3://AB", "s3://b", "s3://bucket//x", "s3://bucket/a/../b",
                          "s3://-bucket/x", "http://bucket/x", "s3://bucket/a\nb"}) {
    EXPECT_CODE(ParseS3Url(bad), kInvalidArgument) << bad;
  }
  // S3 keys are UTF-8, and the prefix goes into JSON (the manifest, the upload's state), which
  // would throw on other bytes: refused here, naming the bytes escaped.
  ASSERT_OK_AND_ASSIGN(S3Url text, ParseS3Url("s3://bucket/donn\xc3\xa9"
                                              "es/\xe6\x97\xa5/\xf0\x9f\x93\xb7"));
  EXPECT_EQ(text.prefix,
            "donn\xc3\xa9"
            "es/\xe6\x97\xa5/\xf0\x9f\x93\xb7");
  for (const char* bad :
       {"s3://bucket/\xff", "s3://bucket/a\xc3", "s3://bucket/\xc0\xaf", "s3://bucket/\xed\xa0\x80",
        "s3://bucket/\xf4\x90\x80\x80", "s3://bucket/\xe6\x97x"}) {
    const absl::Status st = ParseS3Url(bad).status();
    EXPECT_CODE(st, kInvalidArgument) << absl::CHexEscape(bad);
    EXPECT_NE(st.message().find("not UTF-8"), absl::string_view::npos) << st;
  }
}

TEST(S3Config, TheEnvironmentWinsAndSecretsAreNeverSaid) {
  EnvironmentMap env = {{"AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"},
                        {"AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG"},
                        {"AWS_ENDPOINT_URL", "http://127.0.0.1:7480/"},
                        {"AWS_REGION", "eu-west-3"},
                        {"HOME", "/nonexistent"}};
  ASSERT_OK_AND_ASSIGN(S3Config c, S3ConfigFromEnvironment(env));
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:7480");
  EXPECT_EQ(c.region, "eu-west-3");
  EXPECT_EQ(c.access_key, "AKIDEXAMPLE");
  EXPECT_THAT(c.Describe(), Not(HasSubstr("wJalr")));
  EXPECT_THAT(c.Describe(), Not(HasSubstr("AKIDEXAMPLE")));
  env["AWS_ENDPOINT_URL_S3"] = "https://s3.example.org";
  ASSERT_OK_AND_ASSIGN(c, S3ConfigFromEnvironment(env));
  EXPECT_EQ(c.endpoint, "https://s3.example.org");  // the service-specific variable wins
  env["AWS_ENDPOINT_URL_S3"] = "ftp://x";
  EXPECT_CODE(S3ConfigFromEnvironment(env), kInvalidArgument);
}

TEST(S3Config, ProfilesOfTheSharedFiles) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.Sub(".aws"));
  std::ofstream(dir.Sub(".aws/credentials"))
      << "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n\n"
         "[train]\n# a comment\naws_access_key_id=T\naws_secret_access_key=TS\n"
         "aws_session_token = TOKEN\n";
  std::ofstream(dir.Sub(".aws/config"))
      << "[profile train]\nregion = ap-south-1\nendpoint_url = http://10.0.0.1:9000\n";
  EnvironmentMap env = {{"HOME", dir.path().string()}};
  ASSERT_OK_AND_ASSIGN(S3Config d, S3ConfigFromEnvironment(env));
  EXPECT_EQ(d.access_key, "D");
  EXPECT_EQ(d.region, "us-east-1");
  EXPECT_EQ(d.endpoint, "https://s3.us-east-1.amazonaws.com");
  env["AWS_PROFILE"] = "train";
  ASSERT_OK_AND_ASSIGN(S3Config t, S3ConfigFromEnvironment(env));
  EXPECT_EQ(t.access_key, "T");
  EXPECT_EQ(t.session_token, "TOKEN");
  EXPECT_EQ(t.region, "ap-south-1");
  EXPECT_EQ(t.endpoint, "http://10.0.0.1:9000");
  EXPECT_THAT(t.Describe(), HasSubstr("profile 'train'"));
  EXPECT_THAT(t.Describe(), Not(HasSubstr("TS")));
  env["AWS_PROFILE"] = "nope";
  EXPECT_CODE(S3ConfigFromEnvironment(env), kInvalidArgument);
}

TEST(S3Config, NoCredentialsSaysWhereItLooked) {
  auto c = S3ConfigFromEnvironment({{"HOME", "/nonexistent"}});
  EXPECT_CODE(c, kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("AWS_ACCESS_KEY_ID"));
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/.aws/credentials"));
}

TEST(S3Config, MalformedIniLinesAreNamed) {
  EXPECT_CODE(ReadIniSection("[default\nx=1\n", "default", "creds"), kInvalidArgument);
  auto bad = ReadIniSection("[default]\nnot a pair\n", "default", "creds");
  EXPECT_CODE(bad, kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("creds:2"));
  EXPECT_CODE(ReadIniSection("[other]\nx=1\n", "default", "creds"), kNotFound);
}

}  // namespace
}  // namespace ddpio::storage::s3
