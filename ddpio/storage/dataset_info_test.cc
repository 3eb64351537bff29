#include "ddpio/storage/dataset_info.h"

#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "ddpio/storage/dataset_writer.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage {
namespace {

TEST(DatasetInfo, HeaderRoundTrip) {
  DatasetHeader h = testing::MakeHeader(3);
  h.classes[1] = "with space/and \"quotes\" ü";
  h.source_files = 12345678901ull;
  ASSERT_OK_AND_ASSIGN(DatasetHeader back, DecodeHeader(EncodeHeader(h)));
  EXPECT_EQ(back.classes, h.classes);
  EXPECT_EQ(back.source_kind, h.source_kind);
  EXPECT_EQ(back.source_fingerprint, h.source_fingerprint);
  EXPECT_EQ(back.source_files, h.source_files);
  EXPECT_EQ(EncodeHeader(back), EncodeHeader(h));
}

TEST(DatasetInfo, UnknownVersionAndForeignFormatAreRejected) {
  DatasetHeader h = testing::MakeHeader();
  h.format_version = 99;
  absl::StatusOr<DatasetHeader> r = DecodeHeader(EncodeHeader(h));
  EXPECT_CODE(r, kFailedPrecondition);
  EXPECT_NE(r.status().message().find("version 99"), absl::string_view::npos) << r.status();
  EXPECT_CODE(DecodeHeader(R"({"format":"caffe","format_version":1})"), kFailedPrecondition);
  EXPECT_CODE(DecodeHeader("{not json"), kDataLoss);
  EXPECT_CODE(DecodeHeader(R"({"format":"ddpio-lmdb","format_version":1})"), kDataLoss);
}

TEST(DatasetInfo, ATokenHeaderRoundTripsAndIsVersionFour) {
  DatasetHeader h = testing::MakeHeader(0);
  h.format_version = kTokensFormatVersion;
  h.tokens = {2, 1, 32000, "spm.model"};
  ASSERT_OK_AND_ASSIGN(DatasetHeader back, DecodeHeader(EncodeHeader(h)));
  EXPECT_TRUE(IsTokenDataset(back));
  EXPECT_EQ(back.tokens.width, 2);
  EXPECT_EQ(back.tokens.eos_id, 1);
  EXPECT_EQ(back.tokens.vocab_size, 32000u);
  EXPECT_EQ(back.tokens.tokenizer, "spm.model");
  EXPECT_EQ(EncodeHeader(back), EncodeHeader(h));
  // No end marker is -1, kept.
  h.tokens.eos_id = -1;
  h.tokens.width = 4;
  ASSERT_OK_AND_ASSIGN(back, DecodeHeader(EncodeHeader(h)));
  EXPECT_EQ(back.tokens.eos_id, -1);
  EXPECT_EQ(back.tokens.width, 4);
  // A tokens block in a version-3 header, or version 4 without one, is not a dataset ddpio wrote.
  DatasetHeader v3 = h;
  v3.format_version = kBoundRecordsFormatVersion;
  EXPECT_CODE(DecodeHeader(EncodeHeader(v3)), kDataLoss);
  DatasetHeader images = testing::MakeHeader(2);
  EXPECT_FALSE(IsTokenDataset(images));
  images.format_version = kTokensFormatVersion;
  EXPECT_CODE(DecodeHeader(EncodeHeader(images)), kDataLoss);
  // An EOS id wider than the ids.
  DatasetHeader wide = h;
  wide.tokens.width = 2;
  wide.tokens.eos_id = 70000;
  EXPECT_CODE(DecodeHeader(EncodeHeader(wide)), kDataLoss);
  // A forged tokens block is DataLoss, never an exception.
  std::string text = EncodeHeader(h);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"uint32\"", "\"float32\""},
           {"\"eos_id\":-1", "\"eos_id\":-2"},
           {"\"eos_id\":-1", "\"eos_id\":\"x\""},
           {"\"vocab_size\":32000", "\"vocab_size\":-5"}}) {
    std::string forged = text;
    const size_t at = forged.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in " << text;
    forged.replace(at, from.size(), to);
    EXPECT_CODE(DecodeHeader(forged), kDataLoss) << forged;
  }
}

TEST(DatasetInfo, CompletionRoundTrip) {
  DatasetCompletion c{123, 456789, 2};
  ASSERT_OK_AND_ASSIGN(DatasetCompletion back, DecodeCompletion(EncodeCompletion(c)));
  EXPECT_EQ(back.sample_count, 123u);
  EXPECT_EQ(back.payload_bytes, 456789u);
  EXPECT_EQ(back.skipped, 2u);
  EXPECT_CODE(DecodeCompletion("[]"), kDataLoss);
}

// Found by the dataset_meta fuzz target: a number too large for the field was cast silently
// (undefined behaviour); negative, fractional and huge counts are DataLoss now.
TEST(DatasetInfo, CountsThatDoNotFitAreDataLoss) {
  for (const char* text :
       {R"({"payload_bytes":3444444444444444444444444444242,"sample_count":4,"skipped":1})",
        R"({"payload_bytes":1,"sample_count":-4,"skipped":1})",
        R"({"payload_bytes":1,"sample_count":4.5,"skipped":1})",
        R"({"payload_bytes":1,"sample_count":"4","skipped":1})"}) {
    EXPECT_CODE(DecodeCompletion(text), kDataLoss) << text;
  }
  DatasetHeader h;
  h.classes = {"a"};
  std::string text = EncodeHeader(h);
  const std::string version = "\"format_version\":3";
  ASSERT_NE(text.find(version), std::string::npos) << text;
  text.replace(text.find(version), version.size(), "\"format_version\":1e300");
  EXPECT_CODE(DecodeHeader(text), kDataLoss) << text;
}

TEST(DatasetInfo, KeyOrderIsIndexOrder) {
  std::mt19937_64 rng(7);
  for (int t = 0; t < 10000; ++t) {
    uint64_t a = rng() >> (rng() % 64), b = rng() >> (rng() % 64);
    IndexKey ka = EncodeIndexKey(a), kb = EncodeIndexKey(b);
    EXPECT_EQ(a < b, ka < kb) << a << " " << b;  // lexicographic byte order, as LMDB compares
    EXPECT_EQ(DecodeIndexKey(ka.data()), a);
  }
  EXPECT_EQ(IndexKeyHex(17), "0000000000000011");
}

TEST(DatasetInfo, ClassesMustMatchInNameAndOrder) {
  EXPECT_OK(CheckSameClasses({"a", "b"}, {"a", "b"}));
  absl::Status swapped = CheckSameClasses({"a", "b"}, {"b", "a"});
  EXPECT_CODE(swapped, kInvalidArgument);
  EXPECT_NE(swapped.message().find("label 0 is 'b' in the validation set but 'a'"),
            absl::string_view::npos)
      << swapped;
  absl::Status fewer = CheckSameClasses({"a", "b", "c"}, {"a", "b"});
  EXPECT_CODE(fewer, kInvalidArgument);
  EXPECT_NE(fewer.message().find("the training set names 'c'"), absl::string_view::npos) << fewer;
}

bool Mentions(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != absl::string_view::npos;
}

// `json` (an object's text) with one more member first: readers ignore members they do not know.
std::string WithMember(const std::string& json, const std::string& member) {
  return "{" + member + "," + json.substr(1);
}

// Found in issue 41: nlohmann parses any depth, but copies, dumps and compares recursively, so a
// 200 KB header nested 100,000 deep crashed whoever touched it next (the remote manifest's reader
// dumps the header it holds). Refused as the data loss it is, before it is a value.
TEST(DatasetInfo, AHeaderNestedAHundredThousandDeepIsDataLossNotACrash) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const std::string header = EncodeHeader(testing::MakeHeader());
  ASSERT_OK(DecodeHeader(header));
  for (const std::string& text :
       {WithMember(header, "\"x\":" + deep), WithMember(header, "\"classes\":" + deep)}) {
    const absl::StatusOr<DatasetHeader> r = DecodeHeader(text);
    EXPECT_CODE(r, kDataLoss);
    EXPECT_TRUE(Mentions(r.status(), "dataset metadata is not valid: its JSON nests deeper than"))
        << r.status();
  }
  const std::string completion = EncodeCompletion({1, 2, 0});
  EXPECT_CODE(DecodeCompletion(WithMember(completion, "\"x\":" + deep)), kDataLoss);
}

// Found in issue 41: a 52 MB header of 13 M class names was accepted and cost 2.75 GB. A header
// names at most kMaxClasses classes of at most kMaxClassNameBytes each, in kMaxHeaderBytes.
TEST(DatasetInfo, MoreClassesThanTheFormatAllowsIsDataLossNamingTheCap) {
  DatasetHeader h = testing::MakeHeader();
  h.classes.assign(kMaxClasses, "");
  ASSERT_OK_AND_ASSIGN(DatasetHeader at_cap, DecodeHeader(EncodeHeader(h)));
  EXPECT_EQ(at_cap.classes.size(), kMaxClasses);
  h.classes.push_back("");
  const absl::StatusOr<DatasetHeader> over = DecodeHeader(EncodeHeader(h));
  EXPECT_CODE(over, kDataLoss);
  EXPECT_TRUE(Mentions(over.status(), "names 1000001 classes; a valid one names at most 1000000"))
      << over.status();
}

TEST(DatasetInfo, AHeaderOverItsSizeCapOrWithAnOverlongClassNameIsDataLoss) {
  DatasetHeader h = testing::MakeHeader(1);
  h.classes[0] = std::string(kMaxClassNameBytes, 'n');
  ASSERT_OK(DecodeHeader(EncodeHeader(h)));
  h.classes[0].push_back('n');
  const absl::StatusOr<DatasetHeader> long_name = DecodeHeader(EncodeHeader(h));
  EXPECT_CODE(long_name, kDataLoss);
  EXPECT_TRUE(
      Mentions(long_name.status(), "class 0 is a 4097-byte name; a valid one is at most 4096"))
      << long_name.status();
  // Within every per-class bound, but 17 MB in all: a header of millions of long names, smaller.
  h.classes.assign(4250, std::string(kMaxClassNameBytes, 'n'));
  const std::string big = EncodeHeader(h);
  ASSERT_GT(big.size(), kMaxHeaderBytes);
  const absl::StatusOr<DatasetHeader> r = DecodeHeader(big);
  EXPECT_CODE(r, kDataLoss);
  EXPECT_TRUE(Mentions(r.status(), absl::StrCat("dataset metadata is ", big.size(),
                                                " bytes; a valid one is at most 16777216")))
      << r.status();
}

// What a reader refuses, a writer does not write: a source of more classes than the format holds
// is refused before the dataset exists, not converted into one nobody can open.
TEST(DatasetInfo, AWriterRefusesAHeaderItsReadersWouldRefuse) {
  testing::TempDir dir;
  DatasetHeader h = testing::MakeHeader();
  h.classes.assign(kMaxClasses + 1, "");
  const absl::StatusOr<std::unique_ptr<DatasetWriter>> many =
      DatasetWriter::Create(dir.Sub("many"), h, {});
  EXPECT_CODE(many, kInvalidArgument);
  EXPECT_TRUE(Mentions(many.status(), "1000001 classes; a ddpio dataset holds at most 1000000"))
      << many.status();
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("many")));
  h.classes.assign(4250, std::string(kMaxClassNameBytes, 'n'));
  EXPECT_CODE(DatasetWriter::Create(dir.Sub("big"), h, {}), kInvalidArgument);
  h.classes.assign(1, std::string(kMaxClassNameBytes + 1, 'n'));
  EXPECT_CODE(DatasetWriter::Create(dir.Sub("long"), h, {}), kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("big")));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("long")));
}

}  // namespace
}  // namespace ddpio::storage
