// The upload's resume state file and its lock object's body, as the store or an earlier run hands
// them back: what ddpio writes is read exactly; anything else is refused (the upload starts over,
// or the lock is "not a ddpio upload lock"), never half-read, whatever its nesting, types or size.
#include "ddpio/storage/internal/upload_json.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"

namespace ddpio::storage::internal {
namespace {

constexpr char kUrl[] = "s3://bucket/prefix";
constexpr char kDataset[] = "0123456789abcdef-89abcdef-0123456789abcdef0123456789abcdef";

// A state file as SaveState writes it (nlohmann's dump(1): keys sorted, one space per level).
const std::string kState = R"({
 "dataset": "0123456789abcdef-89abcdef-0123456789abcdef0123456789abcdef",
 "objects": {
  "data.mdb": {
   "upload_id": "2~nKLy8aT0sXr3v2QeW9Vp1hQb5Zc7dJf"
  },
  "ddpio-index.bin": {
   "etag": "\"9e107d9d372bb6826bd81d3542a419d6\""
  }
 },
 "token": "5f0c1d2e8a9b3c4d6e7f8091a2b3c4d5",
 "url": "s3://bucket/prefix"
})";

// A lock object's body as UploadLock::Body writes it (nlohmann's dump(): compact, keys sorted).
const std::string kLock =
    R"({"expires":1717000600,"format":"ddpio-upload-lock","host":"node17.cluster",)"
    R"("pid":48213,"started":1717000000,"token":"5f0c1d2e8a9b3c4d6e7f8091a2b3c4d5"})";

// `inner` nested in `levels` arrays.
std::string Nested(int levels, const std::string& inner = "") {
  return std::string(levels, '[') + inner + std::string(levels, ']');
}

std::optional<UploadState> State(const std::string& text) {
  return ParseUploadState(text, kUrl, kDataset);
}

// A state of this upload whose "objects" is `objects` and whose other fields are `extra` (text
// put before "objects", each ending with a comma).
std::string StateWith(const std::string& objects, const std::string& extra = "") {
  return absl::StrCat(R"({"url": "s3://bucket/prefix", "dataset": ")", kDataset, R"(", )", extra,
                      R"("objects": )", objects, "}");
}

TEST(UploadStateJson, ReadsTheStateTheUploadWrites) {
  const std::optional<UploadState> state = State(kState);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->url, kUrl);
  EXPECT_EQ(state->dataset, kDataset);
  EXPECT_EQ(state->token, "5f0c1d2e8a9b3c4d6e7f8091a2b3c4d5");
  EXPECT_EQ(
      state->upload_ids,
      (std::map<std::string, std::string>{{"data.mdb", "2~nKLy8aT0sXr3v2QeW9Vp1hQb5Zc7dJf"}}));
  EXPECT_EQ(state->etags, (std::map<std::string, std::string>{
                              {"ddpio-index.bin", "\"9e107d9d372bb6826bd81d3542a419d6\""}}));
}

TEST(UploadStateJson, AnotherUploadsStateIsIgnored) {
  EXPECT_FALSE(ParseUploadState(kState, "s3://bucket/other", kDataset).has_value());
  EXPECT_FALSE(ParseUploadState(kState, kUrl, "another dataset").has_value());
  EXPECT_FALSE(ParseUploadState(kState, "", kDataset).has_value());
  // "url" or "dataset" missing or not a string is no match either, even for an empty expectation.
  const std::string no_url = absl::StrReplaceAll(kState, {{R"("url")", R"("was_url")"}});
  EXPECT_FALSE(State(no_url).has_value());
  EXPECT_TRUE(ParseUploadState(no_url, "", kDataset).has_value());  // absent reads as ""
  const std::string numeric_url = absl::StrReplaceAll(kState, {{R"("s3://bucket/prefix")", "7"}});
  EXPECT_FALSE(State(numeric_url).has_value());
}

TEST(UploadStateJson, ObjectsMustBeAnObject) {
  EXPECT_TRUE(State(StateWith("{}")).has_value());
  EXPECT_FALSE(State(StateWith(R"([{"upload_id": "2~x"}])")).has_value());
  EXPECT_FALSE(State(StateWith("null")).has_value());
  EXPECT_FALSE(State(StateWith(R"("data.mdb")")).has_value());
  EXPECT_FALSE(
      State(absl::StrCat(R"({"url": "s3://bucket/prefix", "dataset": ")", kDataset, R"("})"))
          .has_value());
}

TEST(UploadStateJson, ATopLevelOtherThanAnObjectIsRefused) {
  for (const std::string& text :
       std::vector<std::string>{"", "null", "[]", "42", R"("s3://bucket/prefix")", "true",
                                absl::StrCat("[", kState, "]")}) {
    EXPECT_FALSE(State(text).has_value()) << text;
  }
}

TEST(UploadStateJson, FieldsOfTheWrongTypeAreLeftOut) {
  const std::optional<UploadState> state = State(StateWith(
      R"({"a": {"upload_id": 12, "etag": "\"e\""}, "b": {"upload_id": "", "etag": null},
          "c": [1, 2], "d": "2~x", "e": {"upload_id": {"x": "2~x"}, "etag": ["\"e\""]},
          "f": {"upload_id": "2~f"}})",
      R"("token": 7, )"));
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->token, "");
  EXPECT_EQ(state->upload_ids, (std::map<std::string, std::string>{{"f", "2~f"}}));
  EXPECT_EQ(state->etags, (std::map<std::string, std::string>{{"a", "\"e\""}}));
}

TEST(UploadStateJson, HugeNumbersAnywhereRefuseTheWholeState) {
  // Beyond a double: not JSON nlohmann can hold, so not a state (not a state with that field
  // left out).
  EXPECT_FALSE(State(StateWith("{}", R"("token": 1e400, )")).has_value());
  EXPECT_FALSE(State(StateWith(R"({"a": {"upload_id": "2~x", "n": -1e999}})")).has_value());
  // Within one: just another value of the wrong type.
  const std::optional<UploadState> state =
      State(StateWith("{}", R"("token": 18446744073709551616, )"));
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->token, "");
}

TEST(UploadStateJson, TruncatedTextIsRefused) {
  for (size_t n = 0; n < kState.size(); ++n) {
    EXPECT_FALSE(State(kState.substr(0, n)).has_value()) << "first " << n << " bytes";
  }
}

TEST(UploadStateJson, NestingIsBoundedAt64Levels) {
  // The document is one level; "x" adds the rest.
  EXPECT_TRUE(State(StateWith("{}", absl::StrCat(R"("x": )", Nested(63), ", "))).has_value());
  EXPECT_FALSE(State(StateWith("{}", absl::StrCat(R"("x": )", Nested(64), ", "))).has_value());
  EXPECT_FALSE(State(StateWith("{}", absl::StrCat(R"("x": )", Nested(100000), ", "))).has_value());
}

TEST(UploadStateJson, SizeIsBoundedAtOneMebibyte) {
  std::string text = kState;
  text.resize(kMaxUploadStateBytes, ' ');  // trailing white space is still JSON
  EXPECT_TRUE(State(text).has_value());
  text.push_back(' ');
  EXPECT_FALSE(State(text).has_value());
}

TEST(UploadLockJson, ReadsTheBodyTheLockWrites) {
  const std::optional<UploadLockHolder> holder = ParseUploadLockHolder(kLock);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->token, "5f0c1d2e8a9b3c4d6e7f8091a2b3c4d5");
  EXPECT_EQ(holder->host, "node17.cluster");
  EXPECT_EQ(holder->pid, 48213);
  EXPECT_EQ(holder->started, 1717000000);
  EXPECT_EQ(holder->expires, 1717000600);
}

TEST(UploadLockJson, TokenAndHostAreCutTo256Bytes) {
  const std::string long_host(300, 'h');
  const std::string long_token(257, 't');
  const std::optional<UploadLockHolder> holder = ParseUploadLockHolder(absl::StrReplaceAll(
      kLock, {{"node17.cluster", long_host}, {"5f0c1d2e8a9b3c4d6e7f8091a2b3c4d5", long_token}}));
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->host, std::string(256, 'h'));
  EXPECT_EQ(holder->token, std::string(256, 't'));
}

TEST(UploadLockJson, EveryFieldIsRequiredWithItsType) {
  const std::vector<std::pair<std::string, std::string>> fields = {
      {R"("token":"5f0c1d2e8a9b3c4d6e7f8091a2b3c4d5")", R"("token":5)"},
      {R"("host":"node17.cluster")", R"("host":null)"},
      {R"("pid":48213)", R"("pid":"48213")"},
      {R"("started":1717000000)", R"("started":1717000000.5)"},
      {R"("expires":1717000600)", R"("expires":[1717000600])"}};
  for (const auto& [field, wrong] : fields) {
    ASSERT_NE(kLock.find(field), std::string::npos) << field;
    EXPECT_FALSE(ParseUploadLockHolder(absl::StrReplaceAll(kLock, {{field, wrong}})).has_value())
        << wrong;
    const std::string renamed = absl::StrReplaceAll(field, {{R"(":)", R"(_":)"}});
    EXPECT_FALSE(ParseUploadLockHolder(absl::StrReplaceAll(kLock, {{field, renamed}})).has_value())
        << renamed;
  }
  // "format" is not looked at (a lock of an older ddpio had none).
  EXPECT_TRUE(
      ParseUploadLockHolder(absl::StrReplaceAll(kLock, {{R"("format":"ddpio-upload-lock",)", ""}}))
          .has_value());
}

TEST(UploadLockJson, NumbersAreSixtyFourBitIntegers) {
  const auto with_expires = [](const std::string& value) {
    return ParseUploadLockHolder(absl::StrReplaceAll(kLock, {{"1717000600", value}}));
  };
  ASSERT_TRUE(with_expires("-1").has_value());
  EXPECT_EQ(with_expires("-1")->expires, -1);
  ASSERT_TRUE(with_expires("9223372036854775807").has_value());
  EXPECT_EQ(with_expires("9223372036854775807")->expires, INT64_MAX);
  ASSERT_TRUE(with_expires("-9223372036854775808").has_value());
  EXPECT_EQ(with_expires("-9223372036854775808")->expires, INT64_MIN);
  // Beyond int64 but within uint64: refused, not wrapped to -1 (a lock that looks expired).
  EXPECT_FALSE(with_expires("9223372036854775808").has_value());
  EXPECT_FALSE(with_expires("18446744073709551615").has_value());
  EXPECT_FALSE(with_expires("18446744073709551616").has_value());  // 2^64: a double
  EXPECT_FALSE(with_expires("1e3").has_value());
  EXPECT_FALSE(with_expires("1e400").has_value());  // not even a double
}

TEST(UploadLockJson, ATopLevelOtherThanAnObjectIsRefused) {
  for (const std::string& body : std::vector<std::string>{
           "", "null", "[]", "48213", R"("ddpio-upload-lock")", absl::StrCat("[", kLock, "]")}) {
    EXPECT_FALSE(ParseUploadLockHolder(body).has_value()) << body;
  }
}

TEST(UploadLockJson, TruncatedBodyIsRefused) {
  for (size_t n = 0; n < kLock.size(); ++n) {
    EXPECT_FALSE(ParseUploadLockHolder(kLock.substr(0, n)).has_value()) << "first " << n;
  }
}

TEST(UploadLockJson, NestingIsBoundedAt64Levels) {
  const auto with_x = [](int levels) {
    return ParseUploadLockHolder(absl::StrCat(R"({"x":)", Nested(levels), ",", kLock.substr(1)));
  };
  EXPECT_TRUE(with_x(63).has_value());
  EXPECT_FALSE(with_x(64).has_value());
  EXPECT_FALSE(with_x(30000).has_value());  // still under the size bound
}

TEST(UploadLockJson, SizeIsBoundedAt64KiB) {
  std::string body = kLock;
  body.resize(kMaxUploadLockBytes, '\n');
  EXPECT_TRUE(ParseUploadLockHolder(body).has_value());
  body.push_back('\n');
  EXPECT_FALSE(ParseUploadLockHolder(body).has_value());
}

}  // namespace
}  // namespace ddpio::storage::internal
