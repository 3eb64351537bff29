#include "ddpio/storage/dataset_info.h"

#include <random>

#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"

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

}  // namespace
}  // namespace ddpio::storage
