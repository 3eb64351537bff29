// A token dataset as `ddpio inspect` and the image consumers see it: documents and tokens
// counted, every id held to the vocabulary with --verify, an image record in it (or a token record
// in an image dataset) a bad record, and the image-only paths refusing it up front.
#include <filesystem>

#include "ddpio/convert/convert.h"
#include "ddpio/storage/dataset_writer.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"
#include "tools/inspect.h"

namespace ddpio {
namespace {

storage::Record Tokens(const std::vector<uint16_t>& ids) {
  storage::Record r;
  r.type = storage::ContentType::kTokensUint16;
  r.source_name = "doc";
  for (uint16_t id : ids) {
    r.payload.push_back(static_cast<uint8_t>(id));
    r.payload.push_back(static_cast<uint8_t>(id >> 8));
  }
  return r;
}

// Three documents of a 100-id vocabulary, the second holding id `second_id`; then `extra`.
std::string WriteTokenDataset(const testing::TempDir& dir, uint16_t second_id,
                              const storage::Record* extra = nullptr) {
  storage::DatasetHeader h = testing::MakeHeader(0);
  h.format_version = storage::kTokensFormatVersion;
  h.tokens = {2, 1, 100, ""};
  const std::string path = dir.Sub("tok");
  auto writer = storage::DatasetWriter::Create(path, h, {});
  EXPECT_OK(writer);
  EXPECT_OK((*writer)->Append(Tokens({5, 6, 1}).view()));
  EXPECT_OK((*writer)->Append(Tokens({7, second_id, 9, 1}).view()));
  EXPECT_OK((*writer)->Append(Tokens({1}).view()));
  if (extra != nullptr) {
    EXPECT_OK((*writer)->Append(extra->view()));
  }
  EXPECT_OK((*writer)->Finish(0));
  return path;
}

tools::InspectReport InspectIt(const std::string& path, bool verify) {
  tools::InspectOptions o;
  o.path = path;
  o.verify = verify;
  o.progress = false;
  auto r = tools::Inspect(o);
  EXPECT_OK(r);
  return r.ok() ? *r : tools::InspectReport{};
}

TEST(TokenInspect, CountsDocumentsAndTokens) {
  testing::TempDir dir;
  const tools::InspectReport r = InspectIt(WriteTokenDataset(dir, 8), true);
  EXPECT_TRUE(r.bad.empty());
  const nlohmann::json j = tools::InspectJson(r);
  EXPECT_EQ(j["documents"], 3);
  EXPECT_EQ(j["tokens"], 8);
  EXPECT_EQ(j["token_vocabulary"]["vocab_size"], 100);
  EXPECT_EQ(j["token_vocabulary"]["document_tokens_max"], 4);
  EXPECT_NE(tools::InspectText(r).find("documents     3, 8 tokens"), std::string::npos)
      << tools::InspectText(r);
}

TEST(TokenInspect, VerifyHoldsEveryIdToTheVocabulary) {
  testing::TempDir dir;
  const std::string path = WriteTokenDataset(dir, 150);
  EXPECT_TRUE(InspectIt(path, false).bad.empty());  // without --verify ids are not read
  const tools::InspectReport r = InspectIt(path, true);
  ASSERT_EQ(r.bad.size(), 1u);
  EXPECT_EQ(r.bad[0].index, 1u);
  EXPECT_NE(r.bad[0].reason.find("id 1 of the document is 150, past the vocabulary of 100"),
            std::string::npos)
      << r.bad[0].reason;
}

TEST(TokenInspect, AnImageRecordInATokenDatasetIsBadAndATokenRecordInAnImageDatasetToo) {
  testing::TempDir dir;
  const storage::Record image = testing::MakeRecord(0);
  const tools::InspectReport r = InspectIt(WriteTokenDataset(dir, 8, &image), false);
  ASSERT_EQ(r.bad.size(), 1u);
  EXPECT_EQ(r.bad[0].index, 3u);
  EXPECT_NE(r.bad[0].reason.find("in a token dataset of 16-bit ids"), std::string::npos);

  const std::string images = dir.Sub("images");
  auto writer = storage::DatasetWriter::Create(images, testing::MakeHeader(2), {});
  ASSERT_OK(writer);
  ASSERT_OK((*writer)->Append(testing::MakeRecord(0).view()));
  ASSERT_OK((*writer)->Append(Tokens({1, 2}).view()));
  ASSERT_OK((*writer)->Finish(0));
  const tools::InspectReport bad = InspectIt(images, false);
  ASSERT_EQ(bad.bad.size(), 1u);
  EXPECT_NE(bad.bad[0].reason.find("tokens_uint16 record in an image dataset"), std::string::npos);
}

TEST(TokenInspect, RewritingATokenDatasetIsRefused) {
  testing::TempDir dir;
  convert::ConvertOptions o;
  o.source_kind = convert::SourceKind::kDataset;
  o.source = WriteTokenDataset(dir, 8);
  o.out = dir.Sub("again");
  absl::StatusOr<convert::ConvertSummary> s = convert::Convert(o);
  EXPECT_CODE(s, kInvalidArgument);
  EXPECT_NE(s.status().message().find("is a token dataset"), std::string::npos) << s.status();
  EXPECT_FALSE(std::filesystem::exists(o.out));
}

TEST(TokenInspect, VerifyHoldsEveryRecordToItsRecordedLength) {
  testing::TempDir dir;
  storage::DatasetHeader h = testing::MakeHeader(0);
  h.format_version = storage::kTokensFormatVersion;
  h.tokens = {2, 1, 100, ""};
  const std::string path = dir.Sub("lie");
  auto writer = storage::DatasetWriter::Create(path, h, {});
  ASSERT_OK(writer);
  ASSERT_OK((*writer)->Append(Tokens({5, 6, 1}).view()));
  ASSERT_OK((*writer)->Append(Tokens({7, 1}).view()));
  // 2 + 3 ids, where the records hold 3 + 2: the same total, each one wrong.
  ASSERT_OK(
      (*writer)->PutMeta(storage::TokenLengthsKey(0), std::string("\x02\0\0\0\x03\0\0\0", 8)));
  ASSERT_OK((*writer)->Finish(0));
  const tools::InspectReport r = InspectIt(path, true);
  ASSERT_EQ(r.bad.size(), 2u);
  EXPECT_NE(r.bad[0].reason.find("holds 3 ids, but the dataset's recorded lengths say 2"),
            std::string::npos)
      << r.bad[0].reason;
}

}  // namespace
}  // namespace ddpio
