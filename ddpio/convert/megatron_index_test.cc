// Megatron-LM's MMIDIDX index: what its writer lays out is read back field by field, and every
// kind of damage — a cut anywhere, counts past the end, sequences overlapping or past the .bin, a
// document index out of order, a dtype that holds no token ids — is an error naming the file,
// never a crash or an allocation the file's size does not justify.
#include "ddpio/convert/megatron_index.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::convert {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Three documents of uint16 tokens: sequences of 3, 0 and 5 tokens (16 bytes of .bin), the first
// document two sequences long.
std::vector<uint8_t> Sample() {
  return WriteMegatronIndex(MegatronDType::kUint16, std::vector<int32_t>{3, 0, 5},
                            std::vector<int64_t>{0, 2, 3});
}

// Overwrites the 8 bytes at `offset` with `v`, little-endian.
void Poke64(std::vector<uint8_t>* b, size_t offset, int64_t v) {
  for (int i = 0; i < 8; ++i)
    (*b)[offset + i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}

// Offsets in Sample(): header 34 bytes, lengths 3 x 4, pointers 3 x 8, document index 3 x 8.
constexpr size_t kVersionAt = 9, kDtypeAt = 17, kSequencesAt = 18, kEntriesAt = 26;
constexpr size_t kLengthsAt = 34, kPointersAt = 46, kDocumentsAt = 70;

TEST(MegatronIndex, WhatTheWriterLaysOutIsReadBack) {
  const std::vector<uint8_t> b = Sample();
  ASSERT_EQ(b.size(), 94u) << "34 + 3 x (4 + 8) + 3 x 8";
  EXPECT_EQ(std::memcmp(b.data(), "MMIDIDX\0\0", 9), 0);
  ASSERT_OK_AND_ASSIGN(MegatronIndex index, ParseMegatronIndex(b, 16, "x.idx"));
  EXPECT_EQ(index.dtype, MegatronDType::kUint16);
  EXPECT_EQ(index.element_bytes, 2u);
  EXPECT_THAT(index.lengths, ElementsAre(3, 0, 5));
  EXPECT_THAT(index.pointers, ElementsAre(0, 6, 6));
  EXPECT_THAT(index.document_index, ElementsAre(0, 2, 3));
  EXPECT_EQ(index.sequences(), 3u);
  EXPECT_EQ(index.documents(), 2u);
  EXPECT_FALSE(index.has_modes);
}

TEST(MegatronIndex, AMultimodalIndexsModesAreAccepted) {
  std::vector<uint8_t> b = Sample();
  b.insert(b.end(), {0, 1, 0});  // one mode per sequence
  ASSERT_OK_AND_ASSIGN(MegatronIndex index, ParseMegatronIndex(b, 16, "x.idx"));
  EXPECT_TRUE(index.has_modes);
  b.push_back(0);
  EXPECT_CODE(ParseMegatronIndex(b, 16, "x.idx"), kDataLoss) << "4 bytes past: neither none nor 3";
}

TEST(MegatronIndex, EveryCutOfTheFileIsAnError) {
  const std::vector<uint8_t> b = Sample();
  for (size_t n = 0; n < b.size(); ++n) {
    auto index = ParseMegatronIndex(absl::MakeConstSpan(b.data(), n), 16, "cut.idx");
    ASSERT_FALSE(index.ok()) << n << " bytes";
    EXPECT_THAT(std::string(index.status().message()), HasSubstr("cut.idx")) << n;
  }
}

TEST(MegatronIndex, NotAnIndexOrNotTokensIsRefusedAsSuch) {
  std::vector<uint8_t> b = Sample();
  b[0] = 'X';
  EXPECT_CODE(ParseMegatronIndex(b, 16, "x.idx"), kInvalidArgument);
  b = Sample();
  Poke64(&b, kVersionAt, 2);
  auto v2 = ParseMegatronIndex(b, 16, "x.idx");
  EXPECT_CODE(v2, kInvalidArgument);
  EXPECT_THAT(std::string(v2.status().message()), HasSubstr("version 2"));
  b = Sample();
  b[kDtypeAt] = static_cast<uint8_t>(MegatronDType::kFloat32);
  auto floats = ParseMegatronIndex(b, 32, "x.idx");
  EXPECT_CODE(floats, kInvalidArgument);
  EXPECT_THAT(std::string(floats.status().message()), HasSubstr("float32"));
  b[kDtypeAt] = 9;
  EXPECT_CODE(ParseMegatronIndex(b, 16, "x.idx"), kDataLoss);
  b[kDtypeAt] = static_cast<uint8_t>(MegatronDType::kInt32);  // 4 bytes a token: 32 bytes of .bin
  EXPECT_CODE(ParseMegatronIndex(b, 16, "x.idx"), kDataLoss) << "past the .bin's 16 bytes";
}

TEST(MegatronIndex, CountsThatTheFileCannotHoldAllocateNothing) {
  for (int64_t count : {int64_t{4}, int64_t{1} << 40, int64_t{-1}}) {
    std::vector<uint8_t> b = Sample();
    Poke64(&b, kSequencesAt, count);
    EXPECT_CODE(ParseMegatronIndex(b, 16, "x.idx"), kDataLoss) << count;
    b = Sample();
    Poke64(&b, kEntriesAt, count);
    EXPECT_CODE(ParseMegatronIndex(b, 16, "x.idx"), kDataLoss) << count;
  }
}

TEST(MegatronIndex, SequencesOutOfPlaceAreDamage) {
  std::vector<uint8_t> b = Sample();
  b[kLengthsAt] = 0xff;
  b[kLengthsAt + 1] = 0xff;
  b[kLengthsAt + 2] = 0xff;
  b[kLengthsAt + 3] = 0xff;  // -1
  EXPECT_CODE(ParseMegatronIndex(b, 16, "x.idx"), kDataLoss);
  b = Sample();
  Poke64(&b, kPointersAt + 16, 2);  // the third sequence inside the first
  auto overlap = ParseMegatronIndex(b, 16, "x.idx");
  EXPECT_CODE(overlap, kDataLoss);
  EXPECT_THAT(std::string(overlap.status().message()), HasSubstr("sequence 2"));
  EXPECT_CODE(ParseMegatronIndex(Sample(), 15, "x.idx"), kDataLoss) << "the .bin one byte short";
}

TEST(MegatronIndex, ADocumentIndexOutOfOrderIsDamage) {
  for (const auto& [at, value] : std::vector<std::pair<size_t, int64_t>>{{kDocumentsAt, 1},
                                                                         {kDocumentsAt + 16, 2},
                                                                         {kDocumentsAt + 16, 4},
                                                                         {kDocumentsAt + 8, 4}}) {
    std::vector<uint8_t> b = Sample();
    Poke64(&b, at, value);
    EXPECT_CODE(ParseMegatronIndex(b, 16, "x.idx"), kDataLoss) << at << " = " << value;
  }
}

}  // namespace
}  // namespace ddpio::convert
