#include "tools/image_decode.h"

#include <zlib.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::tools {
namespace {

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string Chunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  const uLong crc =
      crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()));
  return Be32(static_cast<uint32_t>(data.size())) + body + Be32(static_cast<uint32_t>(crc));
}

// A PNG written by hand (so the test does not depend on any encoder): `rows` are the raw
// scanlines without their filter byte; `extra` chunks go before IDAT.
std::string Png(uint32_t w, uint32_t h, int depth, int color_type,
                const std::vector<std::string>& rows, const std::string& extra = "") {
  std::string raw;
  for (const auto& r : rows) raw += '\0' + r;  // filter type 0
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string z(size, '\0');
  compress(reinterpret_cast<Bytef*>(z.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
           static_cast<uLong>(raw.size()));
  z.resize(size);
  const std::string ihdr =
      Be32(w) + Be32(h) +
      std::string{static_cast<char>(depth), static_cast<char>(color_type), 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + Chunk("IHDR", ihdr) + extra + Chunk("IDAT", z) +
         Chunk("IEND", "");
}

std::string Sample16(uint16_t v) {
  return {static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
}

TEST(ImageDecode, SniffsOnlyTheFormatsTorchvisionReads) {
  EXPECT_EQ(SniffImageFormat(Bytes(Png(1, 1, 8, 0, {"x"}))), "PNG");
  EXPECT_EQ(SniffImageFormat(Bytes(std::string("RIFF\0\0\0\0WEBPVP8 ", 16))), "WEBP");
  EXPECT_EQ(SniffImageFormat(Bytes("BM....")), "BMP");
  EXPECT_EQ(SniffImageFormat(Bytes(std::string("II*\0", 4))), "TIFF");
  EXPECT_EQ(SniffImageFormat(Bytes(std::string("MM\0*", 4))), "TIFF");
  EXPECT_EQ(SniffImageFormat(Bytes("P6\n1 1\n255\n")), "PNM");
  EXPECT_EQ(SniffImageFormat(Bytes("GIF89a")), "");
  EXPECT_EQ(SniffImageFormat(Bytes("\xff\xd8\xff")), "");  // JPEGs are the loader's business
}

// What GraphicsMagick would happily read but a .png must never be: PostScript, SVG, GIF.
TEST(ImageDecode, OtherFormatsAreRefusedNeverHandedToADelegate) {
  for (const std::string body :
       {"%!PS-Adobe-3.0\n0 0 moveto showpage\n", "<svg xmlns='http://www.w3.org/2000/svg'/>",
        "GIF89a\x01\0\x01\0\0\0\0;", ""}) {
    auto r = DecodeImage(Bytes(body), 1000);
    EXPECT_CODE(r, kDataLoss) << body;
    EXPECT_NE(r.status().message().find("not a PNG, WebP, BMP, TIFF, PPM or PGM image"),
              absl::string_view::npos)
        << r.status();
  }
}

TEST(ImageDecode, EightBitPngsAreExactAndAlphaIsDropped) {
  // RGBA 2x1: alpha 0 and 128 must not change the colour (Pillow drops, never composites).
  ASSERT_OK_AND_ASSIGN(
      DecodedImage rgba,
      DecodeImage(Bytes(Png(2, 1, 8, 6, {std::string("\x0a\x14\x1e\x00\xc8\xb4\xa0\x80", 8)})),
                  100));
  EXPECT_EQ(rgba.format, "PNG");
  EXPECT_EQ(rgba.rgb, (std::vector<uint8_t>{10, 20, 30, 200, 180, 160}));
  // Gray 3x1 becomes R = G = B.
  ASSERT_OK_AND_ASSIGN(DecodedImage gray,
                       DecodeImage(Bytes(Png(3, 1, 8, 0, {std::string("\x00\x7f\xff", 3)})), 100));
  EXPECT_EQ(gray.rgb, (std::vector<uint8_t>{0, 0, 0, 127, 127, 127, 255, 255, 255}));
  // A palette with a transparent entry: the palette colour, transparency ignored.
  const std::string plte = Chunk("PLTE", std::string("\x01\x02\x03\xfa\xfb\xfc", 6)) +
                           Chunk("tRNS", std::string("\x00", 1));
  ASSERT_OK_AND_ASSIGN(
      DecodedImage pal,
      DecodeImage(Bytes(Png(2, 1, 8, 3, {std::string("\x00\x01", 2)}, plte)), 100));
  EXPECT_EQ(pal.rgb, (std::vector<uint8_t>{1, 2, 3, 250, 251, 252}));
}

// Pillow keeps 16-bit RGB's high byte but opens 16-bit gray as mode "I" and clips it at 255.
TEST(ImageDecode, SixteenBitSamplesFollowPillow) {
  const std::string rgb16 = Sample16(0x1234) + Sample16(0xabcd) + Sample16(0x00ff);
  ASSERT_OK_AND_ASSIGN(DecodedImage color, DecodeImage(Bytes(Png(1, 1, 16, 2, {rgb16})), 100));
  EXPECT_EQ(color.rgb, (std::vector<uint8_t>{0x12, 0xab, 0x00}));
  const std::string gray16 = Sample16(100) + Sample16(255) + Sample16(256) + Sample16(40000);
  ASSERT_OK_AND_ASSIGN(DecodedImage gray, DecodeImage(Bytes(Png(4, 1, 16, 0, {gray16})), 100));
  EXPECT_EQ(gray.rgb,
            (std::vector<uint8_t>{100, 100, 100, 255, 255, 255, 255, 255, 255, 255, 255, 255}));
  EXPECT_NE(gray.detail.find("16-bit grayscale"), std::string::npos) << gray.detail;
  const std::string pgm = std::string("P5\n2 1\n65535\n") + Sample16(256) + Sample16(100);
  ASSERT_OK_AND_ASSIGN(DecodedImage pnm, DecodeImage(Bytes(pgm), 100));
  EXPECT_EQ(pnm.rgb, (std::vector<uint8_t>{255, 255, 255, 100, 100, 100}));
}

TEST(ImageDecode, TruncatedOrCorruptDataIsDataLossNotGreyRows) {
  std::vector<std::string> rows;
  for (int y = 0; y < 64; ++y) {
    std::string row;
    for (int x = 0; x < 64 * 3; ++x) row += static_cast<char>((x * 7 + y * 31) ^ (x >> 3));
    rows.push_back(row);
  }
  const std::string png = Png(64, 64, 8, 2, rows);
  ASSERT_OK(DecodeImage(Bytes(png), 10000).status());
  for (size_t cut :
       {png.size() - 12 - 20, png.size() / 2, size_t{40}}) {  // inside IDAT, mid-file, inside IHDR
    EXPECT_CODE(DecodeImage(Bytes(png.substr(0, cut)), 10000), kDataLoss) << cut;
  }
  std::string flipped = png;
  flipped[flipped.size() / 2] ^= 0x55;  // breaks the IDAT CRC
  EXPECT_CODE(DecodeImage(Bytes(flipped), 10000), kDataLoss);
  EXPECT_CODE(DecodeImage(Bytes(std::string("BM") + std::string(40, '\xff')), 10000), kDataLoss);
  EXPECT_CODE(DecodeImage(Bytes("P6\n2 2\n255\nab"), 10000), kDataLoss);  // 2 of 12 bytes
}

// A 60000 x 60000 header costs nothing to forge; it must be refused before any pixel memory.
TEST(ImageDecode, ADecompressionBombIsRefusedFromItsHeader) {
  const auto start = std::chrono::steady_clock::now();
  auto r = DecodeImage(Bytes(Png(60000, 60000, 8, 2, {"x"})), 100'000'000);
  EXPECT_CODE(r, kDataLoss);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  auto small_limit = DecodeImage(
      Bytes(Png(20, 20, 8, 0, std::vector<std::string>(20, std::string(20, 'a')))), 100);
  EXPECT_CODE(small_limit, kDataLoss);
  EXPECT_NE(small_limit.status().message().find("limit of 100"), absl::string_view::npos)
      << small_limit.status();
}

TEST(ImageDecode, ThreadsDecodeAtOnceAndAgree) {
  std::vector<std::string> files;
  for (int i = 0; i < 8; ++i) {
    std::vector<std::string> rows;
    for (int y = 0; y < 32; ++y) {
      std::string row;
      for (int x = 0; x < 32 * 3; ++x) row += static_cast<char>(x * i + y);
      rows.push_back(row);
    }
    files.push_back(Png(32, 32, 8, 2, rows));
  }
  std::vector<std::vector<uint8_t>> want;
  for (const auto& f : files) {
    ASSERT_OK_AND_ASSIGN(DecodedImage d, DecodeImage(Bytes(f), 10000));
    want.push_back(d.rgb);
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 25; ++round) {
        for (size_t i = 0; i < files.size(); ++i) {
          auto d = DecodeImage(Bytes(files[i]), 10000);
          if (!d.ok() || d->rgb != want[i]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace ddpio::tools
