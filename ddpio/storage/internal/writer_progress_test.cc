// The writer's progress entry as a resumed conversion reads it back: the two counts the writer
// wrote, exactly; anything else DataLoss, saying whether it was not JSON at all or JSON without
// the counts.
#include "ddpio/storage/internal/writer_progress.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::storage::internal {
namespace {

// As DatasetWriter::CommitPending writes it (nlohmann's dump(): compact, keys sorted).
constexpr char kEntry[] = R"({"payload_bytes":1234567,"records":96})";
constexpr char kMalformed[] = "writer progress entry is malformed";

TEST(WriterProgress, ReadsWhatTheWriterWrites) {
  ASSERT_OK_AND_ASSIGN(WriterProgress p, ParseWriterProgress(kEntry));
  EXPECT_EQ(p.records, 96u);
  EXPECT_EQ(p.payload_bytes, 1234567u);
  ASSERT_OK_AND_ASSIGN(
      p, ParseWriterProgress(R"({"records": 18446744073709551615, "payload_bytes": 0, "x": [1]})"));
  EXPECT_EQ(p.records, UINT64_MAX);
  EXPECT_EQ(p.payload_bytes, 0u);
}

TEST(WriterProgress, CountsOfTheWrongTypeAreMalformed) {
  for (const std::string text :
       {R"({"payload_bytes":1234567})",                            // no records
        R"({"records":96})",                                       // no payload_bytes
        R"({"payload_bytes":1234567,"records":-1})",               // negative
        R"({"payload_bytes":1234567,"records":96.0})",             // a float, even a whole one
        R"({"payload_bytes":1e6,"records":96})",                   // an exponent is a float
        R"({"payload_bytes":18446744073709551616,"records":96})",  // 2^64: a float
        R"({"payload_bytes":"1234567","records":96})",             // a string
        R"({"payload_bytes":1234567,"records":true})",             // a bool
        R"({"payload_bytes":1234567,"records":null})",             // null
        R"({"payload_bytes":1234567,"records":[96]})",             // an array
        R"([96,1234567])",                                         // not an object
        R"("records")", "96", "null", "{}"}) {
    const absl::StatusOr<WriterProgress> p = ParseWriterProgress(text);
    EXPECT_CODE(p, kDataLoss) << text;
    EXPECT_EQ(p.status().message(), kMalformed) << text;
  }
}

TEST(WriterProgress, TextThatIsNotJsonIsMalformedSayingWhy) {
  const std::string entry = kEntry;
  std::vector<std::string> broken = {"", "\xff\xfe", R"({"records":96,})", "{\"records\":1e400}"};
  for (size_t n = 0; n < entry.size(); ++n) broken.push_back(entry.substr(0, n));
  for (const std::string& text : broken) {
    const absl::StatusOr<WriterProgress> p = ParseWriterProgress(text);
    EXPECT_CODE(p, kDataLoss) << text;
    EXPECT_EQ(p.status().message(), absl::StrCat(kMalformed, " (the entry is not valid JSON)"))
        << text;
  }
}

TEST(WriterProgress, NestingIsBoundedAt64Levels) {
  const auto with_x = [](int levels) {
    return ParseWriterProgress(absl::StrCat(R"({"records":96,"payload_bytes":1,"x":)",
                                            std::string(levels, '['), std::string(levels, ']'),
                                            "}"));
  };
  EXPECT_OK(with_x(63));
  const absl::StatusOr<WriterProgress> deep = with_x(64);
  EXPECT_CODE(deep, kDataLoss);
  EXPECT_EQ(
      deep.status().message(),
      absl::StrCat(kMalformed, " (the entry is not valid: its JSON nests deeper than 64 levels)"));
  EXPECT_CODE(with_x(30000), kDataLoss);
}

TEST(WriterProgress, SizeIsBoundedAt64KiB) {
  std::string text = kEntry;
  text.resize(kMaxWriterEntryBytes, ' ');
  EXPECT_OK(ParseWriterProgress(text));
  text.push_back(' ');
  const absl::StatusOr<WriterProgress> big = ParseWriterProgress(text);
  EXPECT_CODE(big, kDataLoss);
  EXPECT_EQ(big.status().message(),
            absl::StrCat(kMalformed, " (the entry is 65537 bytes; a valid one is at most 65536)"));
}

}  // namespace
}  // namespace ddpio::storage::internal
