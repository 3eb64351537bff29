// JSON from outside the process is bounded before nlohmann sees it: a value nested deeper than
// kMaxJsonDepth would overflow the stack wherever it is later copied, dumped or compared.
#include "ddpio/common/internal/json_parse.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio {
namespace {

std::string Nested(int depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

TEST(JsonParse, SixtyFourLevelsParseAndSixtyFiveAreDataLoss) {
  EXPECT_EQ(JsonDepth(Nested(kMaxJsonDepth)), kMaxJsonDepth);
  ASSERT_OK_AND_ASSIGN(nlohmann::json ok, ParseJson(Nested(kMaxJsonDepth), "state file"));
  EXPECT_TRUE(ok.is_array());
  const absl::StatusOr<nlohmann::json> deep = ParseJson(Nested(kMaxJsonDepth + 1), "state file");
  EXPECT_CODE(deep, kDataLoss);
  EXPECT_TRUE(Mentions(deep.status(), "state file")) << deep.status();
  EXPECT_TRUE(Mentions(deep.status(), "deeper than 64 levels")) << deep.status();
}

TEST(JsonParse, ObjectsCountLikeArrays) {
  std::string deep;
  for (int i = 0; i <= kMaxJsonDepth; ++i) deep += "{\"a\":";
  deep += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_CODE(ParseJson(deep, "manifest"), kDataLoss);
  EXPECT_EQ(JsonDepth("[{\"a\":[{}]}]"), 4);
}

TEST(JsonParse, BracketsInsideStringsDoNotCount) {
  const std::string brackets = "[\"" + Nested(1000) + "{{{{\"]";
  EXPECT_EQ(JsonDepth(brackets), 1);
  EXPECT_OK(ParseJson(brackets, "manifest"));
  // An escaped quote does not end the string: what follows it is still text.
  const std::string escaped = "[\"a\\\"" + std::string(100, '[') + "\"]";
  EXPECT_EQ(JsonDepth(escaped), 1);
  EXPECT_OK(ParseJson(escaped, "manifest"));
}

// The other half of honouring escapes: an escaped backslash does not escape the quote after it,
// so a string ending in "\\" really ends and the nesting after it counts. Getting this wrong
// would hide arbitrarily deep nesting from the check.
TEST(JsonParse, AnEscapedBackslashDoesNotHideTheNestingAfterIt) {
  const std::string hidden = "[\"\\\\\"," + Nested(kMaxJsonDepth) + "]";
  EXPECT_EQ(JsonDepth(hidden), kMaxJsonDepth + 1);
  EXPECT_CODE(ParseJson(hidden, "manifest"), kDataLoss);
}

TEST(JsonParse, AHundredThousandDeepArrayIsRefusedWithoutACrash) {
  const std::string bomb = Nested(100'000);  // 200 KB: what crashed the manifest reader
  EXPECT_EQ(JsonDepth(bomb), kMaxJsonDepth + 1);
  const absl::StatusOr<nlohmann::json> r = ParseJson(bomb, "s3://b/p/ddpio-remote.json");
  EXPECT_CODE(r, kDataLoss);
  EXPECT_TRUE(Mentions(r.status(), "s3://b/p/ddpio-remote.json")) << r.status();
  // Unclosed, and inside an object's member, the same.
  EXPECT_CODE(ParseJson(std::string(100'000, '['), "manifest"), kDataLoss);
  EXPECT_CODE(ParseJson("{\"header\":" + Nested(100'000) + "}", "manifest"), kDataLoss);
}

TEST(JsonParse, TextOverTheSizeBoundIsRefusedNamingBoth) {
  const std::string text = "[1,2,3]";
  EXPECT_OK(ParseJson(text, "progress", text.size()));
  const absl::StatusOr<nlohmann::json> r = ParseJson(text, "progress", text.size() - 1);
  EXPECT_CODE(r, kDataLoss);
  EXPECT_TRUE(Mentions(r.status(), "progress is 7 bytes; a valid one is at most 6")) << r.status();
}

TEST(JsonParse, TextThatIsNotJsonIsDataLoss) {
  for (const std::string& text :
       {std::string("{not json"), std::string(""), std::string("[1,2"), std::string("\xff\x00", 2),
        std::string("]]]"), std::string("{\"a\":1}}")}) {
    const absl::StatusOr<nlohmann::json> r = ParseJson(text, "metadata");
    EXPECT_CODE(r, kDataLoss);
    EXPECT_TRUE(Mentions(r.status(), "metadata is not valid JSON")) << r.status();
  }
}

}  // namespace
}  // namespace ddpio
