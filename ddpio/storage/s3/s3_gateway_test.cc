// S3Client against a real S3 server: Ceph's RADOS Gateway brought up by scripts/object-store.sh
// (the README's test command starts it and exports AWS_ENDPOINT_URL and the keys; ctest label
// s3). Without an endpoint these tests skip and say so — unless DDPIO_REQUIRE_S3 is set, as the
// test command sets it, and then a missing gateway is a failure.
#include "tests/support/s3_gateway.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ddpio/common/environment.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/s3/http_client.h"
#include "ddpio/storage/s3/s3_client.h"
#include "ddpio/storage/s3/s3_xml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::storage::s3 {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class Gateway : public ::testing::Test {
 protected:
  void SetUp() override {
    DDPIO_SKIP_WITHOUT_S3();
    ASSERT_OK_AND_ASSIGN(config_, S3ConfigFromEnvironment(CurrentEnvironment()));
    S3ClientOptions o;
    o.retry.max_attempts = 3;
    ASSERT_OK_AND_ASSIGN(client_, S3Client::Create(config_, o));
    bucket_ = absl::StrCat("ddpio-test-", ::getpid(), "-",
                           ::testing::UnitTest::GetInstance()->random_seed(), "-", counter_++);
    ASSERT_OK(client_->CreateBucket(bucket_));
  }
  static int counter_;
  S3Config config_;
  std::unique_ptr<S3Client> client_;
  std::string bucket_;
};
int Gateway::counter_ = 0;

// A session token the gateway cannot decode: Ceph answers a bare 400 InvalidArgument (no
// message), which used to reach the user as just that. It is called what it is — the credentials
// refused, temporary ones — naming the object, without the token or the secret.
TEST_F(Gateway, AMangledSessionTokenIsSaidToBeTheCredentials) {
  ASSERT_OK(client_->Put(bucket_, "k", "v"));
  S3Config mangled = config_;
  mangled.session_token = "not-a-token-the-gateway-issued";
  ASSERT_OK_AND_ASSIGN(auto client, S3Client::Create(mangled));
  auto got = client->Get(bucket_, "k", 16);
  EXPECT_CODE(got, kUnauthenticated);
  const std::string message(got.status().message());
  EXPECT_THAT(message, HasSubstr(S3Client::Name(bucket_, "k")));
  EXPECT_THAT(message, HasSubstr("temporary"));
  EXPECT_THAT(message, ::testing::Not(::testing::HasSubstr("not-a-token-the-gateway-issued")));
  EXPECT_THAT(message, ::testing::Not(::testing::HasSubstr(config_.secret_key)));
}

TEST_F(Gateway, PutGetRangeAndSize) {
  std::string object(3 << 20, '\0');
  for (size_t i = 0; i < object.size(); ++i) object[i] = static_cast<char>(i * 131 + i / 7);
  ASSERT_OK(client_->Put(bucket_, "dir/a file+name", object));
  ASSERT_OK_AND_ASSIGN(uint64_t size, client_->Size(bucket_, "dir/a file+name"));
  EXPECT_EQ(size, object.size());
  ASSERT_OK_AND_ASSIGN(std::string whole, client_->Get(bucket_, "dir/a file+name", object.size()));
  EXPECT_EQ(whole, object);
  ASSERT_OK_AND_ASSIGN(std::string range,
                       client_->GetRange(bucket_, "dir/a file+name", 1000003, 77777));
  EXPECT_EQ(range, object.substr(1000003, 77777));
  EXPECT_CODE(client_->Get(bucket_, "dir/a file+name", 1000), kDataLoss);  // more than allowed
  EXPECT_GE(client_->counters().requests, 5u);
}

TEST_F(Gateway, MultipartUploadResumesFromItsParts) {
  const std::string part1(5 << 20, 'a'), part2(1234, 'b');
  ASSERT_OK_AND_ASSIGN(std::string id, client_->CreateMultipartUpload(bucket_, "big"));
  ASSERT_OK_AND_ASSIGN(std::string e1, client_->UploadPart(bucket_, "big", id, 1, part1));
  // An interrupted upload: what the store holds says where to go on.
  ASSERT_OK_AND_ASSIGN(auto parts, client_->ListParts(bucket_, "big", id));
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].number, 1);
  EXPECT_EQ(parts[0].size, part1.size());
  EXPECT_EQ(parts[0].etag, e1);
  ASSERT_OK_AND_ASSIGN(std::string e2, client_->UploadPart(bucket_, "big", id, 2, part2));
  ASSERT_OK(client_->CompleteMultipartUpload(bucket_, "big", id, {{1, e1}, {2, e2}}).status());
  ASSERT_OK_AND_ASSIGN(uint64_t size, client_->Size(bucket_, "big"));
  EXPECT_EQ(size, part1.size() + part2.size());
  ASSERT_OK_AND_ASSIGN(std::string tail, client_->GetRange(bucket_, "big", part1.size() - 2, 4));
  EXPECT_EQ(tail, "aabb");
}

TEST_F(Gateway, WrongSecretsMissingBucketsAndKeysAreClearErrors) {
  auto missing = client_->Get(bucket_, "no-such-key", 100);
  EXPECT_CODE(missing, kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr(absl::StrCat("s3://", bucket_, "/no-such-key")));
  EXPECT_CODE(client_->Get("ddpio-no-such-bucket-x", "k", 100), kNotFound);
  S3Config wrong = config_;
  wrong.secret_key = "not-the-secret";
  ASSERT_OK_AND_ASSIGN(auto impostor, S3Client::Create(wrong));
  auto denied = impostor->Get(bucket_, "k", 100);
  EXPECT_CODE(denied, kPermissionDenied);
  EXPECT_THAT(denied.status().message(), Not(HasSubstr("not-the-secret")));
  EXPECT_THAT(denied.status().message(), Not(HasSubstr(config_.secret_key)));
  EXPECT_THAT(denied.status().message(), HasSubstr("check the key pair"));
}

// Temporary credentials from the gateway's STS (AssumeRole of the role scripts/object-store.sh
// creates), valid for `seconds`; `expires` is when the gateway says they end (its Expiration).
absl::StatusOr<S3Config> AssumeRole(const S3Config& base, int seconds,
                                    std::chrono::system_clock::time_point* expires) {
  HttpClient::Options o;
  o.sigv4 = absl::StrCat("aws:amz:", base.region, ":sts");
  o.user_password = absl::StrCat(base.access_key, ":", base.secret_key);
  DDPIO_ASSIGN_OR_RETURN(auto http, HttpClient::Create(o));
  HttpRequest r;
  r.method = "POST";
  r.url = base.endpoint + "/";
  r.headers.push_back("Content-Type: application/x-www-form-urlencoded");
  r.body = absl::StrCat(
      "Action=AssumeRole&RoleArn=arn:aws:iam:::role/ddpio-reader&RoleSessionName=ddpio-test"
      "&Version=2011-06-15&DurationSeconds=",
      seconds);
  r.what = "STS AssumeRole";
  DDPIO_ASSIGN_OR_RETURN(HttpResponse response, http->Execute(std::move(r)));
  S3Config temporary = base;
  temporary.access_key = XmlText(response.body, "AccessKeyId");
  temporary.secret_key = XmlText(response.body, "SecretAccessKey");
  temporary.session_token = XmlText(response.body, "SessionToken");
  temporary.credentials_from = "STS AssumeRole";
  if (temporary.session_token.empty()) {
    return absl::InternalError(absl::StrCat("no SessionToken in ", response.body.substr(0, 300)));
  }
  absl::Time end;
  std::string error;
  const std::string expiration = XmlText(response.body, "Expiration");
  if (!absl::ParseTime(absl::RFC3339_full, expiration, &end, &error)) {
    return absl::InternalError(absl::StrCat("Expiration '", expiration, "': ", error));
  }
  *expires = absl::ToChronoTime(end);
  return temporary;
}

TEST_F(Gateway, AnExpiredSessionTokenIsAClearErrorNamingTheObject) {
  ASSERT_OK(client_->Put(bucket_, "k", "payload"));
  // Long enough for one request on a busy machine; the gateway's shortest session is 1 s.
  std::chrono::system_clock::time_point expires;
  ASSERT_OK_AND_ASSIGN(S3Config temporary, AssumeRole(config_, 3, &expires));
  ASSERT_OK_AND_ASSIGN(auto holder, S3Client::Create(temporary));
  auto fresh = holder->Get(bucket_, "k", 100);
  if (std::chrono::system_clock::now() < expires) {
    ASSERT_OK(fresh.status());  // the token works while it lasts
    EXPECT_EQ(*fresh, "payload");
  }
  // What is under test is expiry itself, a time on the gateway's clock (the same machine's).
  std::this_thread::sleep_until(expires + std::chrono::seconds(1));
  auto expired = holder->Get(bucket_, "k", 100);
  EXPECT_CODE(expired, kPermissionDenied);
  const std::string said(expired.status().message());
  EXPECT_THAT(said, HasSubstr(absl::StrCat("s3://", bucket_, "/k")));
  EXPECT_THAT(said, HasSubstr("AWS_SESSION_TOKEN"));
  EXPECT_THAT(said, HasSubstr("may have expired"));
  EXPECT_THAT(said, Not(HasSubstr(temporary.secret_key)));
  EXPECT_THAT(said, Not(HasSubstr(temporary.session_token)));
  // The long-lived keys still work: it was the session that ended, not the account.
  EXPECT_OK(client_->Get(bucket_, "k", 100).status());
}

}  // namespace
}  // namespace ddpio::storage::s3
