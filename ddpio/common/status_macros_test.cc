#include "ddpio/common/status_macros.h"

#include <cerrno>

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  DDPIO_ASSIGN_OR_RETURN(int h, Half(x));
  DDPIO_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  DDPIO_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacros, AssignOrReturnPropagatesFirstError) {
  ASSERT_OK_AND_ASSIGN(int q, Quarter(8));
  EXPECT_EQ(q, 2);
  EXPECT_CODE(Quarter(6), kInvalidArgument);  // 6 -> 3 is odd
  EXPECT_OK(CheckEven(4));
  EXPECT_CODE(CheckEven(5), kInvalidArgument);
}

TEST(StatusMacros, ErrnoMapsToCanonicalCodes) {
  EXPECT_CODE(ErrnoToStatus(ENOENT, "x"), kNotFound);
  EXPECT_CODE(ErrnoToStatus(EACCES, "x"), kPermissionDenied);
  EXPECT_CODE(ErrnoToStatus(EROFS, "x"), kPermissionDenied);
  EXPECT_CODE(ErrnoToStatus(ENOSPC, "x"), kResourceExhausted);
  EXPECT_CODE(ErrnoToStatus(ECONNRESET, "x"), kUnavailable);
  EXPECT_CODE(ErrnoToStatus(ETIMEDOUT, "x"), kDeadlineExceeded);
  absl::Status s = ErrnoToStatus(ENOENT, "opening /data/x");
  EXPECT_NE(s.message().find("opening /data/x"), absl::string_view::npos) << s;
}

TEST(StatusMacros, AnnotateKeepsCodeAndPrependsContext) {
  absl::Status s = Annotate(absl::DataLossError("bad crc"), "record 7");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "record 7: bad crc");
  EXPECT_OK(Annotate(absl::OkStatus(), "ignored"));
}

// Settings ride along as a payload, accumulate in order, survive Annotate, and never touch the
// message (library text names no command-line flag).
TEST(StatusMacros, SettingsAttachedToAnErrorSurviveAnnotate) {
  absl::Status s =
      WithSetting(WithSetting(absl::FailedPreconditionError("seed differs"), "seed"), "data");
  EXPECT_EQ(SettingsOf(s), (std::vector<std::string>{"seed", "data"}));
  absl::Status annotated = Annotate(s, "resuming");
  EXPECT_EQ(annotated.message(), "resuming: seed differs");
  EXPECT_EQ(SettingsOf(annotated), (std::vector<std::string>{"seed", "data"}));
  EXPECT_TRUE(SettingsOf(absl::InternalError("plain")).empty());
  EXPECT_OK(WithSetting(absl::OkStatus(), "seed"));
}

}  // namespace
}  // namespace ddpio
