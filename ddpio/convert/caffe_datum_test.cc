#include "ddpio/convert/caffe_datum.h"

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::convert {
namespace {

// `wire` must outlive what ParseCaffeDatum leaves in `d->data`.
absl::Status Parse(const std::string& wire, CaffeDatum* d) {
  return ParseCaffeDatum(
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(wire.data()), wire.size()), d);
}

std::string Str(absl::Span<const uint8_t> s) { return std::string(s.begin(), s.end()); }

// Bytes written as hex pairs, spaces ignored: H("08 03") == "\x08\x03".
std::string H(const std::string& hex) {
  std::string out;
  std::string digits;
  for (char c : hex) {
    if (c != ' ') digits.push_back(c);
  }
  for (size_t i = 0; i + 1 < digits.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  }
  return out;
}

void ExpectDataLossAt(const std::string& wire, const std::string& field_at) {
  CaffeDatum d;
  absl::Status st = Parse(wire, &d);
  EXPECT_CODE(st, kDataLoss);
  EXPECT_NE(st.message().find(field_at), absl::string_view::npos)
      << "want \"" << field_at << "\" in: " << st;
}

TEST(CaffeDatum, EncodesTheBytesProtobufWrites) {
  // Datum{channels: 3, height: 1, width: 2, data: "abcdef", label: 7}, from the wire format:
  // tag = field << 3 | wire type; int32 as varint, bytes as length + bytes.
  EXPECT_EQ(EncodeCaffeDatum(3, 1, 2, "abcdef", 7, false),
            H("08 03 10 01 18 02 22 06") + "abcdef" + H("28 07"));
  // Encoded: no geometry, label 2, encoded = true (field 7, varint 1).
  EXPECT_EQ(EncodeCaffeDatum(0, 0, 0, "JPEG", 2, true), H("22 04") + "JPEG" + H("28 02 38 01"));
  // Label 0 and empty data are still written; 300 is the two-byte varint ac 02.
  EXPECT_EQ(EncodeCaffeDatum(1, 300, 1, "", 0, false), H("08 01 10 ac 02 18 01 22 00 28 00"));
  // A 200-byte data field has a two-byte length (c8 01).
  EXPECT_EQ(EncodeCaffeDatum(0, 0, 0, std::string(200, 'z'), 1, false).substr(0, 3), H("22 c8 01"));
}

TEST(CaffeDatum, RoundTripsEveryField) {
  struct Case {
    int32_t channels, height, width;
    std::string data;
    int32_t label;
    bool encoded;
  };
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  const int32_t kMax = std::numeric_limits<int32_t>::max();
  for (const Case& c : std::vector<Case>{{3, 2, 2, std::string(12, '\x80'), 0, false},
                                         {1, 1, 1, std::string(1, '\0'), -1, false},
                                         {0, 0, 0, "\xff\xd8\xff", 999, true},
                                         {kMax, kMin, -7, std::string(300, 'q'), kMin, false},
                                         {-1, 5, kMax, "", kMax, true}}) {
    const std::string wire =
        EncodeCaffeDatum(c.channels, c.height, c.width, c.data, c.label, c.encoded);
    CaffeDatum d;
    ASSERT_OK(Parse(wire, &d));
    EXPECT_EQ(d.channels, c.channels);
    EXPECT_EQ(d.height, c.height);
    EXPECT_EQ(d.width, c.width);
    EXPECT_EQ(Str(d.data), c.data);
    EXPECT_EQ(d.label, c.label);
    EXPECT_EQ(d.encoded, c.encoded);
    EXPECT_EQ(d.float_data_count, 0u);
  }
}

TEST(CaffeDatum, ParsesWhatCaffeConvertImagesetWrites) {
  // Caffe's CVMatToDatum calls set_encoded(false), so its raw Datums end in 38 00.
  const std::string wire = H("08 01 10 01 18 02 22 02 07 09 28 04 38 00");
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  EXPECT_FALSE(d.encoded);
  EXPECT_EQ(d.label, 4);
  std::vector<uint8_t> rgb;
  ASSERT_OK(CaffeDatumToRgb(d, 100, &rgb));
  EXPECT_EQ(rgb, (std::vector<uint8_t>{7, 7, 7, 9, 9, 9}));
}

TEST(CaffeDatum, NegativeInt32sAreTenByteVarintsAndShortFormsAreRead) {
  const std::string wire = EncodeCaffeDatum(1, 1, 1, "x", -1, false);
  EXPECT_EQ(wire.substr(wire.size() - 11), H("28 ff ff ff ff ff ff ff ff ff 01"));
  EXPECT_EQ(EncodeCaffeDatum(0, 0, 0, "", -2, false), H("22 00 28 fe ff ff ff ff ff ff ff ff 01"));
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  EXPECT_EQ(d.label, -1);
  // protobuf reads int32 as the low 32 bits: a 5-byte -1 and a 2^32 + 5 are -1 and 5.
  ASSERT_OK(Parse(H("28 ff ff ff ff 0f 08 85 80 80 80 10"), &d));
  EXPECT_EQ(d.label, -1);
  EXPECT_EQ(d.channels, 5);
  // Any non-zero varint is true.
  ASSERT_OK(Parse(H("38 80 01"), &d));
  EXPECT_TRUE(d.encoded);
}

TEST(CaffeDatum, TheLastValueOfAFieldWins) {
  const std::string wire = H("08 03 08 01 22 01") + "a" + H("28 05 22 02") + "bc" + H("28 06");
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(Str(d.data), "bc");
  EXPECT_EQ(d.label, 6);
}

TEST(CaffeDatum, SkipsUnknownFieldsOfEveryWireType) {
  std::string wire = H("48 96 01");  // field 9, varint 150
  wire += H("51") + "12345678";      // field 10, fixed64
  wire += EncodeCaffeDatum(1, 1, 1, "x", 4, false);
  wire += H("5a 02") + "hi";               // field 11, length-delimited
  wire += H("65") + "abcd";                // field 12, fixed32
  wire += H("f8 ff ff ff 0f 00");          // field 2^29 - 1, varint 0
  wire += H("a2 06 03") + "\x08\x09\x0a";  // field 100, a nested message
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  EXPECT_EQ(d.channels, 1);
  EXPECT_EQ(Str(d.data), "x");
  EXPECT_EQ(d.label, 4);
  EXPECT_EQ(d.float_data_count, 0u);
}

TEST(CaffeDatum, CountsPackedAndUnpackedFloatData) {
  std::string wire = H("08 01 10 01 18 01");  // a float Datum: geometry, no data
  wire += H("35") + "abcd";                   // float_data unpacked: 1 value
  wire += H("32 0c") + "abcdefghijkl";        // packed: 3 values
  wire += H("32 00");                         // packed, empty
  wire += H("35") + "wxyz";                   // unpacked: 1 value
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  EXPECT_EQ(d.float_data_count, 5u);
  std::vector<uint8_t> rgb;
  absl::Status st = CaffeDatumToRgb(d, 100, &rgb);
  EXPECT_CODE(st, kDataLoss);
  EXPECT_NE(st.message().find("5 float_data"), absl::string_view::npos) << st;
  ExpectDataLossAt(H("08 01 32 03") + "abc", "float_data at byte 2");  // not whole floats
}

TEST(CaffeDatum, EveryTruncationIsDataLossNeverACrash) {
  // A Datum with every kind of field; a cut exactly between two fields is a valid shorter
  // message, a cut anywhere else is DataLoss.
  const std::vector<std::string> fields = {H("08 03"),
                                           H("10 02"),
                                           H("18 02"),
                                           H("22 0c") + std::string(12, 'p'),
                                           H("28 d4 fd ff ff ff ff ff ff ff 01"),  // label -300
                                           H("38 01"),
                                           H("35") + "abcd",
                                           H("32 04") + "efgh",
                                           H("51") + "12345678",
                                           H("5a 02") + "hi",
                                           H("a2 06 00")};
  std::string wire;
  std::set<size_t> boundaries = {0};
  for (const std::string& f : fields) {
    wire += f;
    boundaries.insert(wire.size());
  }
  EXPECT_EQ(wire.substr(0, 33), EncodeCaffeDatum(3, 2, 2, std::string(12, 'p'), -300, true));
  for (size_t n = 0; n <= wire.size(); ++n) {
    const std::string cut = wire.substr(0, n);
    CaffeDatum d;
    absl::Status st = Parse(cut, &d);
    if (boundaries.count(n) != 0) {
      EXPECT_OK(st) << "cut at " << n;
    } else {
      EXPECT_CODE(st, kDataLoss) << "cut at " << n;
      EXPECT_NE(st.message().find(" at byte "), absl::string_view::npos) << st;
    }
  }
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  EXPECT_EQ(d.label, -300);
  EXPECT_EQ(d.float_data_count, 2u);
}

TEST(CaffeDatum, WrongWireTypeNamesTheFieldAndOffset) {
  const std::string prefix = H("08 03");  // the bad tag is at byte 2
  const std::vector<std::pair<std::string, std::string>> cases = {
      {H("0d") + "abcd", "channels"}, {H("12 01") + "x", "height"}, {H("19") + "12345678", "width"},
      {H("20 01"), "data"},           {H("2a 01") + "x", "label"},  {H("30 01"), "float_data"},
      {H("3d") + "abcd", "encoded"},  {H("0b"), "channels"},  // a group
  };
  for (const auto& [bytes, name] : cases) {
    ExpectDataLossAt(prefix + bytes, name + " at byte 2: wire type");
  }
}

TEST(CaffeDatum, RejectsOverlongVarints) {
  // 11 bytes for the label, and a 10th byte carrying bits past 64.
  ExpectDataLossAt(H("08 03 28 ff ff ff ff ff ff ff ff ff 81 01"), "label at byte 3");
  ExpectDataLossAt(H("28 ff ff ff ff ff ff ff ff ff 02"), "label at byte 1");
  // An overlong tag, and a truncated one.
  ExpectDataLossAt(H("80 80 80 80 80 80 80 80 80 80 01"), "field tag at byte 0");
  ExpectDataLossAt(H("08 03 80"), "field tag at byte 2: truncated");
  // Ten bytes ending in 01 is the longest valid varint.
  CaffeDatum d;
  EXPECT_OK(Parse(H("28 80 80 80 80 80 80 80 80 80 01"), &d));
  EXPECT_EQ(d.label, 0);  // 2^63: its low 32 bits
}

TEST(CaffeDatum, RejectsLengthsPastTheEnd) {
  ExpectDataLossAt(H("08 03 22 7f") + "ab", "data at byte 3: length 127");
  // A "negative" length is 2^64 - 1: refused, not wrapped around.
  ExpectDataLossAt(H("22 ff ff ff ff ff ff ff ff ff 01") + "ab", "data at byte 1");
  ExpectDataLossAt(H("5a 03") + "ab", "unknown field 11 at byte 1");
  ExpectDataLossAt(H("51") + "1234567", "unknown field 10 at byte 1");
  ExpectDataLossAt(H("65") + "abc", "unknown field 12 at byte 1");
  ExpectDataLossAt(H("35") + "abc", "float_data at byte 1");
  CaffeDatum d;
  EXPECT_OK(Parse(H("22 02") + "ab", &d));  // exactly to the end
}

TEST(CaffeDatum, RejectsGroupsAndImpossibleTags) {
  ExpectDataLossAt(H("08 03 43"), "unknown field 8 at byte 2: wire type 3");
  ExpectDataLossAt(H("44"), "unknown field 8 at byte 0: wire type 4");
  ExpectDataLossAt(H("46 00"), "unknown field 8 at byte 0: wire type 6");
  ExpectDataLossAt(H("00 00"), "field tag at byte 0: field number 0");
  ExpectDataLossAt(H("80 80 80 80 10 00"), "field tag at byte 0: field number");  // 2^29
}

TEST(CaffeDatum, ConvertsBgrPlanesToRgbPixels) {
  // 3 wide, 2 high: B plane 10..15, G plane 20..25, R plane 30..35, each row-major.
  std::string planes;
  for (int c : {10, 20, 30}) {
    for (int p = 0; p < 6; ++p) planes.push_back(static_cast<char>(c + p));
  }
  const std::string wire = EncodeCaffeDatum(3, 2, 3, planes, 0, false);
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  std::vector<uint8_t> rgb;
  ASSERT_OK(CaffeDatumToRgb(d, 6, &rgb));  // exactly at the limit
  std::vector<uint8_t> want;
  for (int p = 0; p < 6; ++p) {
    want.insert(want.end(), {static_cast<uint8_t>(30 + p), static_cast<uint8_t>(20 + p),
                             static_cast<uint8_t>(10 + p)});
  }
  EXPECT_EQ(rgb, want);
}

TEST(CaffeDatum, ReplicatesAGrayPlane) {
  const std::string wire = EncodeCaffeDatum(1, 2, 2, H("00 7f 80 ff"), 0, false);
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  std::vector<uint8_t> rgb(50, 1);  // resized, not appended to
  ASSERT_OK(CaffeDatumToRgb(d, 100, &rgb));
  EXPECT_EQ(rgb, (std::vector<uint8_t>{0, 0, 0, 127, 127, 127, 128, 128, 128, 255, 255, 255}));
}

// Each refused Datum leaves the output untouched.
void ExpectRefused(const std::string& wire, uint64_t max_pixels, const std::string& why) {
  CaffeDatum d;
  ASSERT_OK(Parse(wire, &d));
  std::vector<uint8_t> rgb = {42};
  absl::Status st = CaffeDatumToRgb(d, max_pixels, &rgb);
  EXPECT_CODE(st, kDataLoss);
  EXPECT_NE(st.message().find(why), absl::string_view::npos) << "want \"" << why << "\": " << st;
  EXPECT_EQ(rgb, std::vector<uint8_t>{42});
}

TEST(CaffeDatum, RefusesWhatIsNotARawGrayOrBgrImage) {
  ExpectRefused(EncodeCaffeDatum(0, 0, 0, "\xff\xd8\xff", 0, true), 100, "encoded");
  ExpectRefused(EncodeCaffeDatum(3, 1, 1, "abc", 0, true), 100, "encoded");  // even with geometry
  ExpectRefused(EncodeCaffeDatum(4, 1, 1, "abcd", 0, false), 100, "4 channels");
  ExpectRefused(EncodeCaffeDatum(2, 1, 1, "ab", 0, false), 100, "2 channels");
  ExpectRefused(EncodeCaffeDatum(0, 1, 1, "", 0, false), 100, "0 channels");
  ExpectRefused(EncodeCaffeDatum(-3, 1, 1, "abc", 0, false), 100, "-3 channels");
  ExpectRefused(EncodeCaffeDatum(1, 0, 1, "", 0, false), 100, "1x0 pixels");
  ExpectRefused(EncodeCaffeDatum(1, 2, -2, "abcd", 0, false), 100, "-2x2 pixels");
  ExpectRefused(EncodeCaffeDatum(3, 1, 2, "short", 0, false), 100, "5 bytes is not 3x1x2 = 6");
  ExpectRefused(EncodeCaffeDatum(1, 1, 2, "long", 0, false), 100, "4 bytes is not 1x1x2 = 2");
}

TEST(CaffeDatum, ChecksDeclaredSizesBeforeAllocating) {
  const int32_t kMax = std::numeric_limits<int32_t>::max();
  // 2^31-1 squared pixels, 3 channels: more than any limit, and no overflow with none.
  ExpectRefused(EncodeCaffeDatum(3, kMax, kMax, "x", 0, false), 100'000'000,
                "more than the limit of 100000000");
  ExpectRefused(
      EncodeCaffeDatum(3, kMax, kMax, "x", 0, false), std::numeric_limits<uint64_t>::max(),
      absl::StrCat("1 bytes is not 3x", kMax, "x", kMax, " = ", uint64_t{3} * kMax * kMax));
  ExpectRefused(EncodeCaffeDatum(1, 60000, 60000, "x", 0, false), 100'000'000,
                "60000x60000 = 3600000000 pixels");
  // One pixel over the limit, with data of the right size.
  ExpectRefused(EncodeCaffeDatum(1, 2, 3, "abcdef", 0, false), 5, "more than the limit of 5");
}

}  // namespace
}  // namespace ddpio::convert
