// NumPy's .npy header: what numpy.save writes (versions 1.0, 2.0 and 3.0, the headers below made by
// numpy 1.24.2) is read back field by field; the dtypes and layouts ddpio does not read are refused
// each by name; and every kind of damage — a cut anywhere, a size that does not match the file, a
// shape that overflows, a key missing, text that is not numpy's dict literal — is DataLoss saying
// what is wrong, never a crash.
#include "ddpio/convert/npy_file.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::convert {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// Headers (preamble, dict, padding, '\n') cut from files written by /usr/bin/python3 with numpy
// 1.24.2, `import numpy as np`; each is 128 bytes, as numpy aligns the data to 64.

// np.save("u16.npy", np.arange(5, dtype=np.uint16)): 128 + 10 bytes.
constexpr char kUint16Header[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<u2', 'fortran_order': False, 'shape': (5,), }"
    "                                                            \n";
// np.save("i32.npy", np.arange(6, dtype=np.int32).reshape(2, 3)): 128 + 24 bytes.
constexpr char kInt32Header[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"
    "                                                          \n";
// np.save("f32.npy", np.array([1.5, -2.0, 0.25], dtype=np.float32)): 128 + 12 bytes.
constexpr char kFloat32Header[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
    "                                                            \n";
// np.lib.format.write_array(open("v2.npy", "wb"), np.arange(3, dtype=np.int64), version=(2, 0)):
// 128 + 24 bytes.
constexpr char kVersion2Header[] =
    "\x93NUMPY\x02\x00t\x00\x00\x00{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"
    "                                                          \n";
// np.lib.format.write_array(open("v3.npy", "wb"), np.arange(2, dtype=np.uint32), version=(3, 0)):
// 128 + 8 bytes.
constexpr char kVersion3Header[] =
    "\x93NUMPY\x03\x00t\x00\x00\x00{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }"
    "                                                          \n";
// np.save("be.npy", np.arange(4, dtype=">u2")): 128 + 8 bytes.
constexpr char kBigEndianHeader[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '>u2', 'fortran_order': False, 'shape': (4,), }"
    "                                                            \n";
// np.save("fortran.npy", np.asfortranarray(np.arange(6, dtype=np.uint8).reshape(2, 3))):
// 128 + 6 bytes.
constexpr char kFortranHeader[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }"
    "                                                           \n";
// np.save("scalar.npy", np.float64(3.0)): 128 + 8 bytes.
constexpr char kScalarHeader[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (), }"
    "                                                              \n";
// np.save("empty.npy", np.zeros((0, 4), dtype=np.int16)): 128 + 0 bytes.
constexpr char kEmptyHeader[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i2', 'fortran_order': False, 'shape': (0, 4), }"
    "                                                          \n";

// A header literal's bytes (without the literal's terminating NUL).
template <size_t N>
std::string Bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

absl::Span<const uint8_t> Span(const std::string& s) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// The header of a file with `data_bytes` bytes of data after it.
absl::StatusOr<NpyArrayInfo> Parse(const std::string& header, uint64_t data_bytes) {
  return ParseNpyHeader(Span(header), header.size() + data_bytes);
}

// A version-1.0 header around `dict`, padded as numpy pads it (to a multiple of 64, then '\n').
std::string Npy1(std::string_view dict) {
  std::string h(dict);
  const size_t total = (10 + h.size() + 1 + 63) / 64 * 64;
  h.append(total - 10 - h.size() - 1, ' ');
  h += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size() & 0xff) +
         static_cast<char>(h.size() >> 8) + h;
}

std::string Message(const absl::StatusOr<NpyArrayInfo>& info) {
  return std::string(info.status().message());
}

TEST(NpyFile, AUint16VectorFromNumpySaveIsReadBack) {
  const std::string h = Bytes(kUint16Header);
  ASSERT_EQ(h.size(), 128u);
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo info, Parse(h, 10));
  EXPECT_EQ(info.descr, "<u2");
  EXPECT_EQ(info.item_bytes, 2);
  EXPECT_FALSE(info.is_signed);
  EXPECT_TRUE(info.is_unsigned);
  EXPECT_FALSE(info.is_float);
  EXPECT_FALSE(info.fortran_order);
  EXPECT_THAT(info.shape, ElementsAre(5u));
  EXPECT_EQ(info.data_offset, 128u);
  EXPECT_EQ(info.element_count, 5u);
}

TEST(NpyFile, AnInt32MatrixFromNumpySaveIsReadBack) {
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo info, Parse(Bytes(kInt32Header), 24));
  EXPECT_EQ(info.descr, "<i4");
  EXPECT_EQ(info.item_bytes, 4);
  EXPECT_TRUE(info.is_signed);
  EXPECT_FALSE(info.is_unsigned);
  EXPECT_FALSE(info.is_float);
  EXPECT_FALSE(info.fortran_order);
  EXPECT_THAT(info.shape, ElementsAre(2u, 3u));
  EXPECT_EQ(info.data_offset, 128u);
  EXPECT_EQ(info.element_count, 6u);
}

TEST(NpyFile, AFloat32ArrayIsNeitherSignedNorUnsigned) {
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo info, Parse(Bytes(kFloat32Header), 12));
  EXPECT_EQ(info.descr, "<f4");
  EXPECT_EQ(info.item_bytes, 4);
  EXPECT_FALSE(info.is_signed);
  EXPECT_FALSE(info.is_unsigned);
  EXPECT_TRUE(info.is_float);
  EXPECT_FALSE(info.fortran_order);
  EXPECT_THAT(info.shape, ElementsAre(3u));
  EXPECT_EQ(info.data_offset, 128u);
  EXPECT_EQ(info.element_count, 3u);
}

TEST(NpyFile, Versions2And3HaveAFourByteHeaderLength) {
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo v2, Parse(Bytes(kVersion2Header), 24));
  EXPECT_EQ(v2.descr, "<i8");
  EXPECT_EQ(v2.item_bytes, 8);
  EXPECT_TRUE(v2.is_signed);
  EXPECT_FALSE(v2.is_unsigned);
  EXPECT_FALSE(v2.is_float);
  EXPECT_FALSE(v2.fortran_order);
  EXPECT_THAT(v2.shape, ElementsAre(3u));
  EXPECT_EQ(v2.data_offset, 128u);
  EXPECT_EQ(v2.element_count, 3u);
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo v3, Parse(Bytes(kVersion3Header), 8));
  EXPECT_EQ(v3.descr, "<u4");
  EXPECT_EQ(v3.item_bytes, 4);
  EXPECT_TRUE(v3.is_unsigned);
  EXPECT_THAT(v3.shape, ElementsAre(2u));
  EXPECT_EQ(v3.data_offset, 128u);
  EXPECT_EQ(v3.element_count, 2u);
}

TEST(NpyFile, AScalarHasOneElementAndAnEmptyArrayNone) {
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo scalar, Parse(Bytes(kScalarHeader), 8));
  EXPECT_EQ(scalar.descr, "<f8");
  EXPECT_EQ(scalar.item_bytes, 8);
  EXPECT_TRUE(scalar.is_float);
  EXPECT_THAT(scalar.shape, IsEmpty());
  EXPECT_EQ(scalar.element_count, 1u);
  EXPECT_EQ(scalar.data_offset, 128u);
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo empty, Parse(Bytes(kEmptyHeader), 0));
  EXPECT_EQ(empty.descr, "<i2");
  EXPECT_EQ(empty.item_bytes, 2);
  EXPECT_TRUE(empty.is_signed);
  EXPECT_THAT(empty.shape, ElementsAre(0u, 4u));
  EXPECT_EQ(empty.element_count, 0u);
  EXPECT_EQ(empty.data_offset, 128u);
}

TEST(NpyFile, ABigEndianArrayIsRefusedAsSuch) {
  auto info = Parse(Bytes(kBigEndianHeader), 8);
  EXPECT_CODE(info, kDataLoss);
  EXPECT_THAT(Message(info), HasSubstr("'>u2' is big-endian"));
  EXPECT_THAT(Message(info), HasSubstr("astype('<u2')"));
}

TEST(NpyFile, FortranOrderIsRefusedForMoreThanOneDimension) {
  auto info = Parse(Bytes(kFortranHeader), 6);
  EXPECT_CODE(info, kDataLoss);
  EXPECT_THAT(Message(info), HasSubstr("Fortran order"));
  EXPECT_THAT(Message(info), HasSubstr("(2, 3)"));
  // One dimension or none: the same bytes in either order (numpy itself never writes these).
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo vector,
                       Parse(Npy1("{'descr': '|u1', 'fortran_order': True, 'shape': (6,), }"), 6));
  EXPECT_TRUE(vector.fortran_order);
  EXPECT_EQ(vector.element_count, 6u);
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo scalar,
                       Parse(Npy1("{'descr': '|u1', 'fortran_order': True, 'shape': (), }"), 1));
  EXPECT_TRUE(scalar.fortran_order);
}

TEST(NpyFile, EveryCutOfAHeaderIsAnError) {
  for (const std::string& h : {Bytes(kUint16Header), Bytes(kInt32Header), Bytes(kVersion2Header),
                               Bytes(kVersion3Header), Bytes(kScalarHeader)}) {
    for (size_t n = 0; n < h.size(); ++n) {
      const std::string cut = h.substr(0, n);
      auto in_a_longer_file = ParseNpyHeader(Span(cut), 1000);
      EXPECT_CODE(in_a_longer_file, kDataLoss) << n << " bytes";
      auto alone = ParseNpyHeader(Span(cut), n);
      EXPECT_CODE(alone, kDataLoss) << n << " bytes";
    }
  }
}

TEST(NpyFile, DataThatDoesNotFillTheFileExactlyIsDamage) {
  const std::string h = Bytes(kUint16Header);  // 128 + 5 x 2 bytes
  for (uint64_t data : {uint64_t{9}, uint64_t{11}, uint64_t{0}}) {
    auto info = Parse(h, data);
    EXPECT_CODE(info, kDataLoss) << data;
    EXPECT_THAT(Message(info), HasSubstr(absl::StrCat("the file is ", 128 + data, " bytes")));
    EXPECT_THAT(Message(info), HasSubstr("makes 138 bytes"));
  }
  auto short_file = ParseNpyHeader(Span(h), 100);
  EXPECT_CODE(short_file, kDataLoss) << "a file shorter than the header given";
}

TEST(NpyFile, ShapesBeyond64BitsAreDamageNotOverflow) {
  auto elements = Parse(
      Npy1("{'descr': '<u2', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"), 0);
  EXPECT_CODE(elements, kDataLoss);
  EXPECT_THAT(Message(elements), HasSubstr("2^64 elements or more"));
  // 2^63 two-byte elements: the count fits, the bytes do not.
  auto bytes =
      Parse(Npy1("{'descr': '<u2', 'fortran_order': False, 'shape': (9223372036854775808,), }"), 0);
  EXPECT_CODE(bytes, kDataLoss);
  EXPECT_THAT(Message(bytes), HasSubstr("2^64 bytes or more"));
  // 2^64 - 1 one-byte elements: the bytes fit, the header and bytes together do not.
  auto total = Parse(
      Npy1("{'descr': '|u1', 'fortran_order': False, 'shape': (18446744073709551615,), }"), 0);
  EXPECT_CODE(total, kDataLoss);
  EXPECT_THAT(Message(total), HasSubstr("makes 2^64 or more bytes"));
  auto entry = Parse(
      Npy1("{'descr': '|u1', 'fortran_order': False, 'shape': (18446744073709551616,), }"), 0);
  EXPECT_CODE(entry, kDataLoss);
  EXPECT_THAT(Message(entry), HasSubstr("shape entry 0 is 2^64 or more"));
  // A zero anywhere makes the count 0, whatever the rest.
  ASSERT_OK_AND_ASSIGN(
      NpyArrayInfo zero,
      Parse(Npy1("{'descr': '<u8', 'fortran_order': False, 'shape': (4294967296, 0, 4294967296), "
                 "}"),
            0));
  EXPECT_EQ(zero.element_count, 0u);
}

TEST(NpyFile, AMissingKeyIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'fortran_order': False, 'shape': (5,), }", "'descr'"},
      {"{'descr': '<u2', 'shape': (5,), }", "'fortran_order'"},
      {"{'descr': '<u2', 'fortran_order': False, }", "'shape'"},
      {"{}", "'descr'"},
  };
  for (const auto& [dict, key] : cases) {
    auto info = Parse(Npy1(dict), 10);
    EXPECT_CODE(info, kDataLoss) << dict;
    EXPECT_THAT(Message(info), HasSubstr(absl::StrCat("no ", key, " key"))) << dict;
  }
}

TEST(NpyFile, NotANpyFileOrAnotherVersionIsSaidSo) {
  std::string h = Bytes(kUint16Header);
  h[1] = 'n';
  auto magic = Parse(h, 10);
  EXPECT_CODE(magic, kDataLoss);
  EXPECT_THAT(Message(magic), HasSubstr("not a .npy file"));
  const std::string text = "PK\x03\x04 an .npz is a zip";
  EXPECT_THAT(Message(ParseNpyHeader(Span(text), text.size())), HasSubstr("not a .npy file"));
  for (const auto& [major, minor] : std::vector<std::pair<int, int>>{{4, 0}, {1, 1}, {0, 0}}) {
    h = Bytes(kUint16Header);
    h[6] = static_cast<char>(major);
    h[7] = static_cast<char>(minor);
    auto version = Parse(h, 10);
    EXPECT_CODE(version, kDataLoss);
    EXPECT_THAT(Message(version), HasSubstr(absl::StrCat("format version ", major, ".", minor)));
  }
}

TEST(NpyFile, AHeaderLengthPastTheBytesGivenIsDamage) {
  std::string h = Bytes(kUint16Header);
  h[8] = static_cast<char>(0xff);  // 0x00ff: a 255-byte header, in the 128 bytes given
  auto info = Parse(h, 10);
  EXPECT_CODE(info, kDataLoss);
  EXPECT_THAT(Message(info), HasSubstr("header of 255 bytes runs past the 128 bytes read"));
  h = Bytes(kVersion2Header);
  h[11] = static_cast<char>(0xff);  // 4 GiB and more
  EXPECT_CODE(Parse(h, 24), kDataLoss);
}

TEST(NpyFile, PythonsLiteralSyntaxThatNumpyMayWriteIsAccepted) {
  // Keys in any order, double quotes, no trailing comma, tabs and newlines, a Python 2 long.
  for (const char* dict : {"{'shape': (5,), 'fortran_order': False, 'descr': '<u2'}",
                           "{\"descr\": \"<u2\", \"fortran_order\": False, \"shape\": (5,)}",
                           "{ 'descr' :'<u2' ,\t'fortran_order':False,\n'shape':( 5 , ) , }",
                           "{'descr': '<u2', 'fortran_order': False, 'shape': (5L,), }"}) {
    ASSERT_OK_AND_ASSIGN(NpyArrayInfo info, Parse(Npy1(dict), 10));
    EXPECT_EQ(info.descr, "<u2") << dict;
    EXPECT_THAT(info.shape, ElementsAre(5u)) << dict;
    EXPECT_EQ(info.element_count, 5u) << dict;
  }
  ASSERT_OK_AND_ASSIGN(
      NpyArrayInfo trailing,
      Parse(Npy1("{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2, 3,), }"), 12));
  EXPECT_THAT(trailing.shape, ElementsAre(1u, 2u, 3u));
}

TEST(NpyFile, TheDtypesDdpioReadsAreRecognised) {
  struct Case {
    const char* descr;
    int bytes;
    bool is_signed, is_unsigned, is_float;
  };
  for (const Case& c : {Case{"|u1", 1, false, true, false}, Case{"<u1", 1, false, true, false},
                        Case{"|i1", 1, true, false, false}, Case{"<i2", 2, true, false, false},
                        Case{"<u8", 8, false, true, false}, Case{"<f2", 2, false, false, true},
                        Case{"<f8", 8, false, false, true}}) {
    ASSERT_OK_AND_ASSIGN(NpyArrayInfo info,
                         Parse(Npy1(absl::StrCat("{'descr': '", c.descr,
                                                 "', 'fortran_order': False, 'shape': (3,), }")),
                               3 * c.bytes));
    EXPECT_EQ(info.item_bytes, c.bytes) << c.descr;
    EXPECT_EQ(info.is_signed, c.is_signed) << c.descr;
    EXPECT_EQ(info.is_unsigned, c.is_unsigned) << c.descr;
    EXPECT_EQ(info.is_float, c.is_float) << c.descr;
  }
}

TEST(NpyFile, OtherDtypesAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"'|O'", "Python objects"},
      {"[('a', '<i4'), ('b', '<f4')]", "structured dtypes are not supported"},
      {"'>i8'", "big-endian"},
      {"'<c8'", "'<c8' is not supported"},
      {"'|b1'", "'|b1' is not supported"},
      {"'<U3'", "'<U3' is not supported"},
      {"'|S5'", "'|S5' is not supported"},
      {"'|u2'", "'|u2' is not supported"},
      {"'=u2'", "'=u2' is not supported"},
      {"'<u3'", "'<u3' is not supported"},
      {"'<f1'", "'<f1' is not supported"},
      {"'<u2 '", "'<u2 ' is not supported"},
      {"'<u16'", "'<u16' is not supported"},
      {"''", "'' is not supported"},
      {"'<M8[ns]'", "'<M8[ns]' is not supported"},
  };
  for (const auto& [descr, why] : cases) {
    auto info = Parse(
        Npy1(absl::StrCat("{'descr': ", descr, ", 'fortran_order': False, 'shape': (1,), }")), 8);
    EXPECT_CODE(info, kDataLoss) << descr;
    EXPECT_THAT(Message(info), HasSubstr(why)) << descr;
  }
}

TEST(NpyFile, TextThatIsNotNumpysDictLiteralIsRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"['descr', '<u2']", "not a Python dict literal"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5,), 'extra': 1}", "unknown key"},
      {"{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (5,)}", "given twice"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': [5]}", "not a tuple"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5)}", "a number, not a tuple"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (-5,)}", "not a non-negative integer"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5.0,)}", "not a non-negative integer"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (0x5,)}", "not a non-negative integer"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (05,)}", "not a non-negative integer"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5a,)}", "not a non-negative integer"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (,)}", "not a non-negative integer"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5,,)}", "not a non-negative integer"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5 5)}", "no ',' or ')'"},
      {"{'descr': '<u2', 'fortran_order': 0, 'shape': (5,)}", "not True or False"},
      {"{'descr': '<u2', 'fortran_order': Falsey, 'shape': (5,)}", "not True or False"},
      {"{'descr': '<u2', 'fortran_order': false, 'shape': (5,)}", "not True or False"},
      {"{'descr': '<u2', 'fortran_order': False 'shape': (5,)}", "no ',' or '}'"},
      {"{'descr' '<u2', 'fortran_order': False, 'shape': (5,)}", "no ':'"},
      {"{'descr': '<u2\", 'fortran_order': False, 'shape': (5,)}", "no ',' or '}'"},
      {"{'descr': '<u2, 'fortran_order': False, 'shape': (5,)}", "no ',' or '}'"},
      {"{'descr': '\\x3cu2', 'fortran_order': False, 'shape': (5,)}", "a backslash"},
      {"{'descr': <u2, 'fortran_order': False, 'shape': (5,)}", "no quoted string"},
      {"{descr: '<u2', 'fortran_order': False, 'shape': (5,)}", "no quoted string"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5,)}}", "after the dict's closing"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5,)} # comment", "after the dict's"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5,),, }", "no quoted string"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (5,)", "no ',' or '}'"},
      {"{'descr': '<u2", "unclosed string"},
  };
  for (const auto& [dict, why] : cases) {
    auto info = Parse(Npy1(dict), 10);
    EXPECT_CODE(info, kDataLoss) << dict;
    EXPECT_THAT(Message(info), HasSubstr(why)) << dict;
  }
}

TEST(NpyFile, AHeaderMustEndInANewline) {
  std::string h = Bytes(kUint16Header);
  h.back() = ' ';
  auto info = Parse(h, 10);
  EXPECT_CODE(info, kDataLoss);
  EXPECT_THAT(Message(info), HasSubstr("does not end in a newline"));
  const std::string nul_in_padding =
      Npy1(std::string("{'descr': '<u2', 'fortran_order': False, 'shape': (5,)}") + '\0');
  EXPECT_CODE(Parse(nul_in_padding, 10), kDataLoss);
}

TEST(NpyFile, ThirtyTwoDimensionsAreReadAndThirtyThreeRefused) {
  auto shape_of = [](int dims) {
    std::string s = "(";
    for (int i = 0; i < dims; ++i) s += "1, ";
    return Npy1(absl::StrCat("{'descr': '|u1', 'fortran_order': False, 'shape': ", s, "), }"));
  };
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo info, Parse(shape_of(32), 1));
  EXPECT_EQ(info.shape.size(), 32u);
  EXPECT_EQ(info.element_count, 1u);
  auto too_many = Parse(shape_of(33), 1);
  EXPECT_CODE(too_many, kDataLoss);
  EXPECT_THAT(Message(too_many), HasSubstr("more than 32 dimensions"));
}

TEST(NpyFile, ReadNpyFileReadsTheHeaderOfAFile) {
  testing::TempDir dir;
  const std::string path = dir.Sub("u16.npy");
  // The whole of u16.npy: the header, then 0, 1, 2, 3, 4 as little-endian u16.
  std::ofstream(path, std::ios::binary)
      << Bytes(kUint16Header) << std::string("\0\0\1\0\2\0\3\0\4\0", 10);
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo info, ReadNpyFile(path));
  EXPECT_EQ(info.descr, "<u2");
  EXPECT_THAT(info.shape, ElementsAre(5u));
  EXPECT_EQ(info.data_offset, 128u);
  EXPECT_EQ(info.element_count, 5u);
}

TEST(NpyFile, ReadNpyFileNamesThePathInItsErrors) {
  testing::TempDir dir;
  const std::string missing = dir.Sub("missing.npy");
  auto not_found = ReadNpyFile(missing);
  EXPECT_CODE(not_found, kNotFound);
  EXPECT_THAT(Message(not_found), HasSubstr(missing));
  const std::string big_endian = dir.Sub("be.npy");
  std::ofstream(big_endian, std::ios::binary) << Bytes(kBigEndianHeader) << std::string(8, '\0');
  auto refused = ReadNpyFile(big_endian);
  EXPECT_CODE(refused, kDataLoss);
  EXPECT_THAT(Message(refused), StartsWith(big_endian + ": "));
  EXPECT_THAT(Message(refused), HasSubstr("big-endian"));
  const std::string empty = dir.Sub("empty.npy");
  std::ofstream(empty, std::ios::binary).flush();
  auto nothing = ReadNpyFile(empty);
  EXPECT_CODE(nothing, kDataLoss);
  EXPECT_THAT(Message(nothing), StartsWith(empty + ": not a .npy file"));
  EXPECT_CODE(ReadNpyFile(dir.path().string()), kInvalidArgument) << "a directory";
}

TEST(NpyFile, ReadNpyFileReadsAHeaderOfAnySizeItAllows) {
  // A 64 KiB header (version 2.0: more than a u16 holds) before 1 byte of data.
  testing::TempDir dir;
  const std::string path = dir.Sub("big.npy");
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }";
  dict.append(65536 - dict.size() - 1, ' ');
  dict += '\n';
  std::string file("\x93NUMPY\x02\x00\x00\x00\x01\x00", 12);
  std::ofstream(path, std::ios::binary) << file << dict << 'x';
  ASSERT_OK_AND_ASSIGN(NpyArrayInfo info, ReadNpyFile(path));
  EXPECT_EQ(info.data_offset, 65548u);
  EXPECT_EQ(info.element_count, 1u);
  // One byte more of header and it no longer fits what ReadNpyFile reads.
  std::ofstream(path, std::ios::binary)
      << std::string("\x93NUMPY\x02\x00\x01\x00\x01\x00", 12) << ' ' << dict << 'x';
  auto too_big = ReadNpyFile(path);
  EXPECT_CODE(too_big, kDataLoss);
  EXPECT_THAT(Message(too_big), HasSubstr("runs past the 65548 bytes read"));
}

}  // namespace
}  // namespace ddpio::convert
