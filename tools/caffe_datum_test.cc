#include "tools/caffe_datum.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::tools {
namespace {

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(CaffeDatum, EncodesWhatProtobufWritesAndParsesItBack) {
  // Hand-written wire bytes of Datum{channels: 3, height: 1, width: 2, data: "abcdef", label: 7}.
  const std::string wire(
      "\x08\x03\x10\x01\x18\x02\x22\x06"
      "abcdef"
      "\x28\x07",
      16);
  EXPECT_EQ(EncodeCaffeDatum(3, 1, 2, "abcdef", 7, false), wire);
  CaffeDatum d;
  ASSERT_OK(ParseCaffeDatum(Bytes(wire), &d));
  EXPECT_EQ(d.channels, 3);
  EXPECT_EQ(d.height, 1);
  EXPECT_EQ(d.width, 2);
  EXPECT_EQ(std::string(d.data.begin(), d.data.end()), "abcdef");
  EXPECT_EQ(d.label, 7);
  EXPECT_FALSE(d.encoded);
  // An encoded Datum: no geometry, encoded = true (field 7).
  const std::string encoded = EncodeCaffeDatum(0, 0, 0, "JPEG", 2, true);
  ASSERT_OK(ParseCaffeDatum(Bytes(encoded), &d));
  EXPECT_TRUE(d.encoded);
  EXPECT_EQ(d.label, 2);
  EXPECT_EQ(d.channels, 0);
}

TEST(CaffeDatum, NegativeLabelsAreTenByteVarints) {
  const std::string wire = EncodeCaffeDatum(1, 1, 1, "x", -1, false);
  EXPECT_EQ(wire.substr(wire.size() - 11),
            std::string("\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11));
  CaffeDatum d;
  ASSERT_OK(ParseCaffeDatum(Bytes(wire), &d));
  EXPECT_EQ(d.label, -1);
}

TEST(CaffeDatum, UnknownFieldsAreSkippedAndFloatDataCounted) {
  std::string wire = EncodeCaffeDatum(1, 1, 1, "x", 4, false);
  wire += std::string("\x48\x96\x01", 3);  // field 9, varint 150
  wire += std::string(
      "\x51"
      "12345678",
      9);  // field 10, fixed64
  wire += std::string(
      "\x5a\x02"
      "hi",
      4);  // field 11, bytes
  wire += std::string(
      "\x35"
      "abcd",
      5);  // float_data unpacked: 1 value
  wire += std::string(
      "\x32\x08"
      "abcdefgh",
      10);  // float_data packed: 2 values
  CaffeDatum d;
  ASSERT_OK(ParseCaffeDatum(Bytes(wire), &d));
  EXPECT_EQ(d.label, 4);
  EXPECT_EQ(d.float_data_count, 3u);
}

TEST(CaffeDatum, EveryTruncationIsDataLossNeverACrash) {
  const std::string wire = EncodeCaffeDatum(3, 2, 2, std::string(12, 'p'), 300, true);
  CaffeDatum d;
  int failures = 0;
  for (size_t n = 1; n < wire.size(); ++n) {
    absl::Status st = ParseCaffeDatum(Bytes(wire.substr(0, n)), &d);
    if (!st.ok()) {
      EXPECT_CODE(st, kDataLoss);
      ++failures;
    }
  }
  // A cut at a field boundary is a valid, shorter Datum; every other cut is an error.
  EXPECT_GE(failures, static_cast<int>(wire.size()) - 6);
}

TEST(CaffeDatum, MalformedWireDataNamesFieldAndOffset) {
  CaffeDatum d;
  absl::Status wrong_type =
      ParseCaffeDatum(Bytes(std::string("\x0a\x01x", 3)), &d);  // channels as bytes
  EXPECT_CODE(wrong_type, kDataLoss);
  EXPECT_NE(wrong_type.message().find("channels at byte 0"), absl::string_view::npos) << wrong_type;
  EXPECT_CODE(ParseCaffeDatum(Bytes(std::string("\x22\x7f"
                                                "ab",
                                                4)),
                              &d),
              kDataLoss);  // data past the end
  EXPECT_CODE(ParseCaffeDatum(Bytes(std::string(11, '\xff') + "\x01"), &d),
              kDataLoss);                                                      // overlong varint
  EXPECT_CODE(ParseCaffeDatum(Bytes(std::string("\x0b", 1)), &d), kDataLoss);  // a group
  EXPECT_CODE(ParseCaffeDatum(Bytes(std::string("\x32\x03"
                                                "abc",
                                                5)),
                              &d),
              kDataLoss);  // 3 bytes of floats
}

TEST(CaffeDatum, RawDatumsBecomeRgbWithSizesChecked) {
  // A parsed Datum views the bytes it came from: each encoding lives as long as its Datum is used.
  CaffeDatum d;
  std::vector<uint8_t> rgb;
  // 2x1 BGR planes: B = {1, 2}, G = {3, 4}, R = {5, 6}.
  const std::string color = EncodeCaffeDatum(3, 1, 2, std::string("\x01\x02\x03\x04\x05\x06", 6), 0, false);
  ASSERT_OK(ParseCaffeDatum(Bytes(color), &d));
  ASSERT_OK(CaffeDatumToRgb(d, 100, &rgb));
  EXPECT_EQ(rgb, (std::vector<uint8_t>{5, 3, 1, 6, 4, 2}));
  const std::string gray = EncodeCaffeDatum(1, 2, 1, std::string("\x09\x0a", 2), 0, false);
  ASSERT_OK(ParseCaffeDatum(Bytes(gray), &d));
  ASSERT_OK(CaffeDatumToRgb(d, 100, &rgb));
  EXPECT_EQ(rgb, (std::vector<uint8_t>{9, 9, 9, 10, 10, 10}));

  const std::string short_data = EncodeCaffeDatum(3, 1, 2, "short", 0, false);
  ASSERT_OK(ParseCaffeDatum(Bytes(short_data), &d));
  EXPECT_CODE(CaffeDatumToRgb(d, 100, &rgb), kDataLoss);
  const std::string four = EncodeCaffeDatum(4, 1, 1, "abcd", 0, false);
  ASSERT_OK(ParseCaffeDatum(Bytes(four), &d));
  EXPECT_CODE(CaffeDatumToRgb(d, 100, &rgb), kDataLoss);
  const std::string huge = EncodeCaffeDatum(3, 60000, 60000, "x", 0, false);
  ASSERT_OK(ParseCaffeDatum(Bytes(huge), &d));
  absl::Status too_big = CaffeDatumToRgb(d, 100'000'000, &rgb);
  EXPECT_CODE(too_big, kDataLoss);
  EXPECT_NE(too_big.message().find("limit"), absl::string_view::npos) << too_big;
  const std::string encoded = EncodeCaffeDatum(0, 0, 0, "JPEG", 0, true);
  ASSERT_OK(ParseCaffeDatum(Bytes(encoded), &d));
  EXPECT_CODE(CaffeDatumToRgb(d, 100, &rgb), kDataLoss);
}

}  // namespace
}  // namespace ddpio::tools
