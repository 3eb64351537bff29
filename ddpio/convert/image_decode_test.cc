#include "ddpio/convert/image_decode.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ddpio/common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::convert {
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

std::string Le16(uint16_t v) { return {static_cast<char>(v & 0xff), static_cast<char>(v >> 8)}; }
std::string Le32(uint32_t v) {
  return Le16(static_cast<uint16_t>(v)) + Le16(static_cast<uint16_t>(v >> 16));
}

// An uncompressed little-endian TIFF of `w` x `h` pixels of `samples` 8-bit samples (`pixels`
// holds them all), with ExtraSamples `extra` (none when negative) and Orientation `orientation`.
std::string Tiff(uint32_t w, uint32_t h, int photometric, int samples, const std::string& pixels,
                 int extra = -1, int orientation = 1) {
  struct Entry {
    uint16_t tag, type;
    uint32_t count;
    std::string value;  // 4 bytes: the values, or where they are
  };
  const auto shorts = [](uint32_t v) { return Le16(static_cast<uint16_t>(v)) + Le16(0); };
  const uint32_t n = extra >= 0 ? 11 : 10;
  const uint32_t bits_at = 8 + 2 + 12 * n + 4, data_at = bits_at + (samples > 2 ? 2 * samples : 0);
  std::string bits;
  for (int i = 0; i < samples; ++i) bits += Le16(8);
  std::vector<Entry> entries = {
      {256, 4, 1, Le32(w)},
      {257, 4, 1, Le32(h)},
      {258, 3, static_cast<uint32_t>(samples),
       samples > 2 ? Le32(bits_at) : bits + std::string(4 - bits.size(), '\0')},
      {259, 3, 1, shorts(1)},
      {262, 3, 1, shorts(photometric)},
      {273, 4, 1, Le32(data_at)},
      {274, 3, 1, shorts(orientation)},
      {277, 3, 1, shorts(samples)},
      {278, 4, 1, Le32(h)},
      {279, 4, 1, Le32(static_cast<uint32_t>(pixels.size()))}};
  if (extra >= 0) entries.push_back({338, 3, 1, shorts(extra)});
  std::string out = std::string("II*\0", 4) + Le32(8) + Le16(static_cast<uint16_t>(n));
  for (const Entry& e : entries) out += Le16(e.tag) + Le16(e.type) + Le32(e.count) + e.value;
  out += Le32(0);
  if (samples > 2) out += bits;
  return out + pixels;
}

std::string Bytes8(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s += static_cast<char>(b);
  return s;
}

// A grey PNG of `side` x `side` zeros at zlib level 9: 97 KB for 10,000 x 10,000.
std::string ZeroPng(uint32_t side) {
  z_stream z{};
  deflateInit(&z, 9);
  std::string row(side + 1, '\0'), out;
  std::vector<unsigned char> buf(1 << 16);
  for (uint32_t y = 0; y <= side; ++y) {
    z.next_in = reinterpret_cast<Bytef*>(row.data());
    z.avail_in = y < side ? static_cast<uInt>(row.size()) : 0;
    const int flush = y < side ? Z_NO_FLUSH : Z_FINISH;
    do {
      z.next_out = buf.data();
      z.avail_out = static_cast<uInt>(buf.size());
      deflate(&z, flush);
      out.append(reinterpret_cast<char*>(buf.data()), buf.size() - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  const std::string ihdr = Be32(side) + Be32(side) + std::string{8, 0, 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + Chunk("IHDR", ihdr) + Chunk("IDAT", out) +
         Chunk("IEND", "");
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

// Pillow opens 16-bit gray + alpha PNGs with raw mode "LA;16B": the high byte, not clipped.
TEST(ImageDecode, SixteenBitGrayAlphaPngKeepsTheHighByte) {
  const std::string la16 = Sample16(0x1234) + Sample16(0xffff) + Sample16(0x00c8) + Sample16(0);
  ASSERT_OK_AND_ASSIGN(DecodedImage la, DecodeImage(Bytes(Png(2, 1, 16, 4, {la16})), 100));
  EXPECT_EQ(la.rgb, (std::vector<uint8_t>{0x12, 0x12, 0x12, 0, 0, 0}));
}

// TIFF stores ink: C, M, Y must not become R, G, B. Pillow's cmyk2rgb: r = (255 - k) - c(255 -
// k)/255.
TEST(ImageDecode, CmykTiffIsConvertedAsPillowDoes) {
  const std::string px = Bytes8({200, 0, 0, 0, 10, 20, 30, 128, 0, 0, 0, 255, 255, 255, 255, 0});
  ASSERT_OK_AND_ASSIGN(DecodedImage cmyk, DecodeImage(Bytes(Tiff(4, 1, 5, 4, px)), 100));
  EXPECT_EQ(cmyk.rgb, (std::vector<uint8_t>{55, 255, 255, 122, 117, 112, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(cmyk.detail, "CMYK");
}

// Associated alpha (ExtraSamples 1): Pillow's "RGBa" divides it out, c * 255 / a, and gives 0 where
// a = 0; unassociated alpha and four samples without ExtraSamples keep their colours.
TEST(ImageDecode, PremultipliedTiffAlphaIsDividedOutAsPillowDoes) {
  const std::string px = Bytes8({100, 50, 20, 128, 10, 20, 30, 0, 60, 60, 60, 64});
  ASSERT_OK_AND_ASSIGN(DecodedImage assoc, DecodeImage(Bytes(Tiff(3, 1, 2, 4, px, 1)), 100));
  EXPECT_EQ(assoc.rgb, (std::vector<uint8_t>{199, 99, 39, 0, 0, 0, 239, 239, 239}));
  for (int extra : {-1, 0, 2}) {
    ASSERT_OK_AND_ASSIGN(DecodedImage plain, DecodeImage(Bytes(Tiff(3, 1, 2, 4, px, extra)), 100));
    EXPECT_EQ(plain.rgb, (std::vector<uint8_t>{100, 50, 20, 10, 20, 30, 60, 60, 60})) << extra;
  }
}

// Pillow transposes a TIFF by its Orientation tag when loading it; GraphicsMagick does not.
TEST(ImageDecode, TiffOrientationIsAppliedAsPillowDoes) {
  const std::string px = Bytes8({1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6});  // 3 x 2
  ASSERT_OK_AND_ASSIGN(DecodedImage six, DecodeImage(Bytes(Tiff(3, 2, 2, 3, px, -1, 6)), 100));
  EXPECT_EQ(six.width, 2);
  EXPECT_EQ(six.height, 3);
  // ROTATE_270 (clockwise): the bottom row becomes the left column.
  EXPECT_EQ(six.rgb, (std::vector<uint8_t>{4, 4, 4, 1, 1, 1, 5, 5, 5, 2, 2, 2, 6, 6, 6, 3, 3, 3}));
}

// GraphicsMagick widens a 5-bit channel to v << 3; Pillow's "BGR;15" to v * 255 / 31.
TEST(ImageDecode, SixteenBitBmpChannelsAreWidenedAsPillowDoes) {
  const uint16_t pixel = 16 | 31 << 5 | 1 << 10;  // blue 16, green 31, red 1
  const std::string info = Le32(40) + Le32(1) + Le32(1) + Le16(1) + Le16(16) + Le32(0) + Le32(4) +
                           Le32(2835) + Le32(2835) + Le32(0) + Le32(0);
  const std::string bmp =
      "BM" + Le32(14 + 40 + 4) + Le32(0) + Le32(14 + 40) + info + Le16(pixel) + Le16(0);
  ASSERT_OK_AND_ASSIGN(DecodedImage d, DecodeImage(Bytes(bmp), 100));
  EXPECT_EQ(d.rgb, (std::vector<uint8_t>{8, 255, 131}));
}

// PpmImagePlugin: maxval 255 raw; a PGM's 65535 as mode "I" (clipped); every other maxval scaled
// with round(v / maxval * 255) (to 65535, then clipped, for a PGM above 255); plain files alike.
TEST(ImageDecode, PnmMaxvalsFollowPillow) {
  ASSERT_OK_AND_ASSIGN(DecodedImage p5,
                       DecodeImage(Bytes("P5\n4 1\n100\n" + Bytes8({0, 1, 50, 100})), 100));
  EXPECT_EQ(p5.rgb, (std::vector<uint8_t>{0, 0, 0, 3, 3, 3, 128, 128, 128, 255, 255, 255}));
  ASSERT_OK_AND_ASSIGN(DecodedImage p6,
                       DecodeImage(Bytes("P6\n1 1\n1\n" + Bytes8({0, 1, 1})), 100));
  EXPECT_EQ(p6.rgb, (std::vector<uint8_t>{0, 255, 255}));
  ASSERT_OK_AND_ASSIGN(DecodedImage mode_i,
                       DecodeImage(Bytes("P5 2 1 1000 " + Sample16(3) + Sample16(4)), 100));
  EXPECT_EQ(mode_i.rgb, (std::vector<uint8_t>{197, 197, 197, 255, 255, 255}));  // 196.6, 262.1
  ASSERT_OK_AND_ASSIGN(DecodedImage p2, DecodeImage(Bytes("P2\n# c\n3 1 2\n0 1 2\n"), 100));
  EXPECT_EQ(p2.rgb,
            (std::vector<uint8_t>{0, 0, 0, 128, 128, 128, 255, 255, 255}));  // 127.5: half to even
  ASSERT_OK_AND_ASSIGN(DecodedImage p1, DecodeImage(Bytes("P1\n3 1\n101"), 100));
  EXPECT_EQ(p1.rgb, (std::vector<uint8_t>{0, 0, 0, 255, 255, 255, 0, 0, 0}));
  EXPECT_CODE(DecodeImage(Bytes("P2\n2 1\n5\n1 6\n"), 100), kDataLoss);  // above maxval
}

// What Pillow converts in a way ddpio does not reproduce is refused, naming the colour space.
TEST(ImageDecode, ColourSpacesDdpioCannotMatchAreRefusedByName) {
  auto lab = DecodeImage(Bytes(Tiff(1, 1, 8, 3, Bytes8({50, 0, 0}))), 100);
  EXPECT_CODE(lab, kDataLoss);
  EXPECT_NE(lab.status().message().find("CIE L*a*b*"), absl::string_view::npos) << lab.status();
  auto cmyk_alpha = DecodeImage(Bytes(Tiff(1, 1, 5, 5, Bytes8({1, 2, 3, 4, 5}), 2)), 100);
  EXPECT_CODE(cmyk_alpha, kDataLoss);
  EXPECT_NE(cmyk_alpha.status().message().find("photometric 5"), absl::string_view::npos)
      << cmyk_alpha.status();
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

// A 60000 x 60000 header costs nothing to forge; it must be refused before any pixel memory,
// in words that name the format (not "JPEG") and the setting.
TEST(ImageDecode, ADecompressionBombIsRefusedFromItsHeader) {
  auto r = DecodeImage(Bytes(Png(60000, 60000, 8, 2, {"x"})), 100'000'000);
  EXPECT_CODE(r, kDataLoss);
  EXPECT_NE(r.status().message().find("the PNG declares 60000x60000"), absl::string_view::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("max_pixels"), absl::string_view::npos) << r.status();
  EXPECT_EQ(SettingsOf(r.status()), std::vector<std::string>{"max_pixels"});
  auto small_limit = DecodeImage(
      Bytes(Png(20, 20, 8, 0, std::vector<std::string>(20, std::string(20, 'a')))), 100);
  EXPECT_CODE(small_limit, kDataLoss);
  EXPECT_NE(small_limit.status().message().find("limit of 100"), absl::string_view::npos)
      << small_limit.status();
  auto pgm = DecodeImage(Bytes("P5\n20 20\n255\n" + std::string(400, 'a')), 100);
  EXPECT_NE(pgm.status().message().find("the PGM declares 20x20"), absl::string_view::npos)
      << pgm.status();
}

// The memory a decode may take is estimated from the header (13 bytes a pixel for a plain PNG:
// GraphicsMagick's 16-bit pixel cache with colour indexes, and the RGB result) and checked
// against the budget before decoding.
TEST(ImageDecode, TheDecodingBudgetIsCheckedBeforeDecoding) {
  const std::string png = Png(64, 64, 8, 0, std::vector<std::string>(64, std::string(64, 'a')));
  ImageDecodeOptions o;
  o.max_decode_bytes = 64 * 64 * 13;
  ASSERT_OK(DecodeImage(Bytes(png), o).status());
  o.max_decode_bytes -= 1;
  auto r = DecodeImage(Bytes(png), o);
  EXPECT_CODE(r, kDataLoss);
  EXPECT_NE(r.status().message().find("decoding this 64x64 PNG needs about 53248 bytes (13 bytes a "
                                      "pixel), more than the decoding budget of 53247 bytes"),
            absl::string_view::npos)
      << r.status();
  EXPECT_EQ(SettingsOf(r.status()), std::vector<std::string>{"max_decode_bytes"});
  // PPM/PGM are parsed straight into the result: 3 bytes a pixel.
  o.max_decode_bytes = 2 * 2 * 3;
  EXPECT_OK(DecodeImage(Bytes("P5\n2 2\n255\nabcd"), o).status());
  o.max_decode_bytes -= 1;
  EXPECT_CODE(DecodeImage(Bytes("P5\n2 2\n255\nabcd"), o), kDataLoss);
}

// Decodes the 97 KB PNG of 10,000 x 10,000 zeros (inside the 100 MP limit) in a child process
// when run by BombWithinThePixelLimitIsRefusedWithBoundedMemory below; skipped otherwise.
TEST(ImageDecode, BombDecodedInAChild) {
  if (std::getenv("DDPIO_IMAGE_DECODE_BOMB_CHILD") == nullptr)
    GTEST_SKIP() << "run as a child only";
  auto r = DecodeImage(Bytes(ZeroPng(10000)), ImageDecodeOptions{});
  std::_Exit(r.status().code() == absl::StatusCode::kDataLoss ? 0 : 1);
}

// The bomb cost 1.98 GB and 7 s a thread to decode; the default budget refuses it from its header.
// Peak memory is that of a child process (getrusage), so nothing else in this test binary counts.
TEST(ImageDecode, BombWithinThePixelLimitIsRefusedWithBoundedMemory) {
  const std::string bomb = ZeroPng(10000);
  EXPECT_LT(bomb.size(), 100'000u);
  auto r = DecodeImage(Bytes(bomb), ImageDecodeOptions{});
  EXPECT_CODE(r, kDataLoss);
  EXPECT_NE(r.status().message().find("decoding this 10000x10000 PNG needs about 1240 MiB"),
            absl::string_view::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("budget of 1024 MiB"), absl::string_view::npos) << r.status();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("DDPIO_IMAGE_DECODE_BOMB_CHILD", "1", 1);
    execl("/proc/self/exe", "convert_sources_test",
          "--gtest_filter=ImageDecode.BombDecodedInAChild", nullptr);
    std::_Exit(2);
  }
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's decode was not refused as DataLoss";
  EXPECT_LT(usage.ru_maxrss / 1024, 600)
      << "peak RSS of the child, MB (the process alone takes ~200)";
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
}  // namespace ddpio::convert
