// The small helpers every format and generator shares: byte order, FNV-1a, SplitMix64, enum names.
#include <cmath>
#include <string>
#include <vector>

#include "ddpio/common/coding.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/splitmix64.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio {
namespace {

TEST(ByteOrder, LittleEndianWhateverTheHost) {
  std::string out;
  PutLe<uint32_t>(&out, 0x11223344u);
  PutLe<uint16_t>(&out, 0xA1B2);
  PutLe<int64_t>(&out, -2);
  PutLe<float>(&out, 1.5f);  // 0x3FC00000
  const std::string want("\x44\x33\x22\x11\xB2\xA1\xFE\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x00\x00\xC0\x3F",
                         18);
  EXPECT_EQ(out, want);
  ByteReader r(out);
  uint32_t a = 0;
  uint16_t b = 0;
  int64_t c = 0;
  float d = 0;
  ASSERT_TRUE(r.Le(&a) && r.Le(&b) && r.Le(&c) && r.Le(&d));
  EXPECT_EQ(a, 0x11223344u);
  EXPECT_EQ(b, 0xA1B2);
  EXPECT_EQ(c, -2);
  EXPECT_EQ(d, 1.5f);
  EXPECT_FALSE(r.Le(&a));  // past the end: refused, nothing read
  std::vector<uint64_t> many;
  ByteReader short_reader(std::string_view(out).substr(0, 10));
  EXPECT_FALSE(short_reader.LeAll(2, &many));
  EXPECT_EQ(short_reader.left(), 10u);
}

TEST(Coding, FixedBigEndianAndLengthPrefixed) {
  std::string out;
  PutFixed32(&out, 0x11223344u);
  PutFixed64(&out, 0x0102030405060708ull);
  PutLengthPrefixed(&out, "key");
  EXPECT_EQ(out,
            std::string("\x44\x33\x22\x11\x08\x07\x06\x05\x04\x03\x02\x01\x03\x00\x00\x00key", 19));
  EXPECT_EQ(DecodeFixed32(out.data()), 0x11223344u);
  EXPECT_EQ(DecodeFixed64(out.data() + 4), 0x0102030405060708ull);
  uint8_t be[8];
  EncodeBigEndian64(be, 0x0102030405060708ull);
  EXPECT_EQ(be[0], 0x01);
  EXPECT_EQ(be[7], 0x08);
  EXPECT_EQ(DecodeBigEndian64(be), 0x0102030405060708ull);
  EXPECT_EQ(DecodeBigEndian32(be), 0x01020304u);
  EXPECT_EQ(DecodeBigEndian16(be + 6), 0x0708);
  ByteReader r(std::string_view(out).substr(12));
  std::string key;
  ASSERT_TRUE(r.LengthPrefixed(&key));
  EXPECT_EQ(key, "key");
  EXPECT_TRUE(r.done());
  ByteReader cut(std::string_view(out).substr(12, 6));  // the length says 3, 2 follow
  EXPECT_FALSE(cut.LengthPrefixed(&key));
  EXPECT_EQ(cut.left(), 6u);
}

TEST(Fnv1a64, StandardTestVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);  // the offset basis
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(Fnv1a64("bar", Fnv1a64("foo")), Fnv1a64("foobar"));  // continues a digest
}

TEST(SplitMix64, ReferenceSequence) {
  // From the reference implementation (Vigna's splitmix64.c) seeded with 0.
  SplitMix64 g(0);
  EXPECT_EQ(g.Next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(g.Next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(g.Next(), 0x06c45d188009454full);
  SplitMix64 u(7);
  for (int i = 0; i < 1000; ++i) {
    const double x = u.Uniform(2.0, 3.0);
    EXPECT_GE(x, 2.0);
    EXPECT_LT(x, 3.0);
  }
}

enum class Color { kRed, kBlue };
constexpr EnumName<Color> kColors[] = {{Color::kRed, "red"}, {Color::kBlue, "blue"}};

TEST(EnumNames, NamesAndParsesBack) {
  EXPECT_EQ(NameOf(kColors, Color::kBlue), "blue");
  ASSERT_OK_AND_ASSIGN(Color c, ParseName(kColors, "red", "color"));
  EXPECT_EQ(c, Color::kRed);
  auto bad = ParseName(kColors, "green", "color");
  EXPECT_CODE(bad, kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown color 'green' (red, blue)");
}

}  // namespace
}  // namespace ddpio
