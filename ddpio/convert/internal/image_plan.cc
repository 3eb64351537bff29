#include "ddpio/convert/internal/image_plan.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/status_macros.h"

// The reference for every rule below is Pillow 9.4 (Debian 12's python3-pil): PngImagePlugin's
// _MODES, TiffImagePlugin's OPEN_INFO and _setup, BmpImagePlugin._bitmap, PpmImagePlugin, and
// Convert.c / Unpack.c for what each mode and raw mode becomes in convert("RGB").
// python/tests/test_colour_spaces.py checks each rule pixel for pixel against Pillow itself.

namespace ddpio::convert::internal {
namespace {

uint32_t Be32(absl::Span<const uint8_t> b, size_t at) { return DecodeBigEndian32(b.data() + at); }
uint32_t Le32(absl::Span<const uint8_t> b, size_t at) { return DecodeFixed32(b.data() + at); }
uint16_t Le16(absl::Span<const uint8_t> b, size_t at) { return DecodeFixed16(b.data() + at); }

absl::StatusOr<Plan> DescribePng(absl::Span<const uint8_t> b) {
  if (b.size() < 33 || !StartsWith(b, "IHDR", 12)) {
    return absl::DataLossError("PNG without an IHDR chunk where the header must be");
  }
  const int depth = b[24], type = b[25], interlace = b[28];
  static const std::map<std::pair<int, int>, int> kChannels = {
      {{1, 0}, 1}, {{2, 0}, 1},  {{4, 0}, 1},  {{8, 0}, 1}, {{16, 0}, 1},
      {{8, 2}, 3}, {{16, 2}, 3}, {{1, 3}, 1},  {{2, 3}, 1}, {{4, 3}, 1},
      {{8, 3}, 1}, {{8, 4}, 2},  {{16, 4}, 2}, {{8, 6}, 4}, {{16, 6}, 4}};
  auto it = kChannels.find({depth, type});
  if (it == kChannels.end()) {
    return absl::DataLossError(
        absl::StrCat("PNG with bit depth ", depth, " and colour type ", type, ", not a valid PNG"));
  }
  Plan plan{"PNG"};
  plan.width = Be32(b, 16);
  plan.height = Be32(b, 20);
  if (depth == 16 && type == 0) {  // mode "I" ("I;16B"): convert("RGB") clips at 255
    plan.rule = Rule::kGrayClip;
    plan.detail = "16-bit grayscale, clipped at 255 as Pillow's convert(\"RGB\") does";
  } else if (depth == 16) {  // "RGB;16B", "RGBA;16B", "LA;16B": the high byte
    plan.detail = type == 4 ? "16-bit grayscale + alpha" : "16-bit";
  }
  // An interlaced PNG is decoded whole before GraphicsMagick sees a row.
  if (interlace != 0) plan.coder_bytes_per_pixel = (it->second * depth + 7) / 8;
  return plan;
}

// ---- TIFF -----------------------------------------------------------------------------------

// The tags of a TIFF's first directory that decide Pillow's mode. Every offset is checked.
class TiffDirectory {
 public:
  static absl::StatusOr<TiffDirectory> Read(absl::Span<const uint8_t> b) {
    TiffDirectory d(b, !b.empty() && b[0] == 'M');
    if (b.size() < 8) return d.Malformed("header");
    const uint32_t ifd = d.U32(4);
    if (ifd < 8 || uint64_t{ifd} + 2 > b.size()) return d.Malformed("first directory offset");
    const uint32_t count = d.U16(ifd);
    if (uint64_t{ifd} + 2 + uint64_t{count} * 12 > b.size()) return d.Malformed("directory");
    for (uint32_t i = 0; i < count; ++i) {
      const size_t at = ifd + 2 + size_t{i} * 12;
      const uint16_t tag = d.U16(at);
      if (!IsRelevant(tag)) continue;
      if (d.tags_.count(tag) != 0) {
        return absl::DataLossError(absl::StrCat("TIFF with tag ", tag, " twice in its directory"));
      }
      DDPIO_ASSIGN_OR_RETURN(d.tags_[tag], d.Values(at));
    }
    return d;
  }

  bool big_endian() const { return big_endian_; }
  bool Has(uint16_t tag) const { return tags_.count(tag) != 0; }
  std::vector<uint32_t> Get(uint16_t tag, std::vector<uint32_t> fallback) const {
    auto it = tags_.find(tag);
    return it == tags_.end() ? fallback : it->second;
  }
  uint32_t Get1(uint16_t tag, uint32_t fallback) const {
    auto it = tags_.find(tag);
    return it == tags_.end() || it->second.empty() ? fallback : it->second[0];
  }

 private:
  TiffDirectory(absl::Span<const uint8_t> b, bool big_endian) : b_(b), big_endian_(big_endian) {}

  static bool IsRelevant(uint16_t tag) {
    switch (tag) {
      case 256:
      case 257:
      case 258:
      case 259:
      case 262:
      case 266:
      case 274:
      case 277:
      case 284:
      case 320:
      case 338:
      case 339:
        return true;
      default:
        return false;
    }
  }
  absl::Status Malformed(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("malformed TIFF: its ", what, " lies outside the file"));
  }
  uint16_t U16(size_t at) const {
    return big_endian_ ? DecodeBigEndian16(b_.data() + at) : Le16(b_, at);
  }
  uint32_t U32(size_t at) const { return big_endian_ ? Be32(b_, at) : Le32(b_, at); }

  // BYTE, SHORT or LONG values of the entry at `at` (a colour map holds at most 3 x 65536).
  absl::StatusOr<std::vector<uint32_t>> Values(size_t at) const {
    const uint16_t tag = U16(at), type = U16(at + 2);
    const uint32_t count = U32(at + 4);
    const int size = type == 1 ? 1 : type == 3 ? 2 : type == 4 ? 4 : 0;
    if (size == 0 || count > 3 * 65536) {
      return absl::DataLossError(
          absl::StrCat("TIFF tag ", tag, " of type ", type, " with ", count, " values"));
    }
    const uint64_t bytes = uint64_t{count} * size;
    const uint64_t from = bytes <= 4 ? at + 8 : U32(at + 8);
    if (from + bytes > b_.size()) return Malformed(absl::StrCat("tag ", tag));
    std::vector<uint32_t> v(count);
    for (uint32_t i = 0; i < count; ++i) {
      const size_t p = from + size_t{i} * size;
      v[i] = size == 1 ? b_[p] : size == 2 ? U16(p) : U32(p);
    }
    return v;
  }

  absl::Span<const uint8_t> b_;
  bool big_endian_;
  std::map<uint16_t, std::vector<uint32_t>> tags_;
};

// Pillow's key into OPEN_INFO (TiffImagePlugin._setup), reduced to what decides the rule.
struct TiffKey {
  bool big_endian = false;
  uint32_t photometric = 0;
  uint32_t compression = 1;
  uint32_t sample_format = 1;  // 0 when the samples disagree (no OPEN_INFO entry)
  uint32_t fill_order = 1;
  std::vector<uint32_t> bits;
  std::vector<uint32_t> extra;
  uint32_t planar = 1;
};

std::string Describe(const TiffKey& k) {
  std::string bits;
  for (uint32_t v : k.bits) absl::StrAppend(&bits, bits.empty() ? "" : ",", v);
  std::string extra;
  for (uint32_t v : k.extra) absl::StrAppend(&extra, extra.empty() ? "" : ",", v);
  return absl::StrCat("(photometric ", k.photometric, ", ", bits, " bits, sample format ",
                      k.sample_format, extra.empty() ? "" : absl::StrCat(", extra samples ", extra),
                      k.fill_order != 1 ? ", fill order 2" : "", ")");
}

absl::StatusOr<TiffKey> ReadTiffKey(const TiffDirectory& d) {
  TiffKey k;
  k.big_endian = d.big_endian();
  k.compression = d.Get1(259, 1);
  static const uint32_t kKnown[] = {1,     2,     3,     4,     5,     6,     7,     8,    32771,
                                    32773, 32809, 32946, 34676, 34677, 34925, 50000, 50001};
  if (std::find(std::begin(kKnown), std::end(kKnown), k.compression) == std::end(kKnown)) {
    return Refuse("TIFF", absl::StrCat("with compression ", k.compression),
                  "Pillow cannot open it");
  }
  if (k.compression == 6) {
    return Refuse("TIFF", "with old-style JPEG compression (6)",
                  "Pillow and GraphicsMagick read it differently");
  }
  k.photometric = d.Get1(262, 0);
  k.fill_order = d.Get1(266, 1);
  k.planar = d.Get1(284, 1);
  const std::vector<uint32_t> formats = d.Get(339, {1});
  k.sample_format = formats.empty() ? 1 : formats[0];
  if (formats.size() > 1) {
    const bool all_one =
        std::all_of(formats.begin(), formats.end(), [](uint32_t f) { return f == 1; });
    k.sample_format = all_one ? 1 : 0;
  }
  k.bits = d.Get(258, {1});
  k.extra = d.Get(338, {});
  const uint32_t samples = d.Get1(277, 1);
  if (samples > 6) {
    return Refuse("TIFF", absl::StrCat("with ", samples, " samples a pixel"),
                  "Pillow cannot open it");
  }
  if (samples < k.bits.size()) {
    k.bits.resize(samples);
  } else if (samples > k.bits.size() && k.bits.size() == 1) {
    k.bits.assign(samples, k.bits[0]);
  }
  if (k.bits.size() != samples) {
    return absl::DataLossError(
        absl::StrCat("TIFF with ", samples, " samples a pixel but ", k.bits.size(), " bit depths"));
  }
  return k;
}

bool AllBits(const TiffKey& k, uint32_t bits, size_t count) {
  return k.bits.size() == count &&
         std::all_of(k.bits.begin(), k.bits.end(), [&](uint32_t b) { return b == bits; });
}
bool Extra(const TiffKey& k, std::initializer_list<uint32_t> extra) {
  return std::equal(k.extra.begin(), k.extra.end(), extra.begin(), extra.end());
}

// The rule for a key Pillow's OPEN_INFO accepts; nullopt when Pillow has no entry for it.
std::optional<Plan> TiffRule(const TiffKey& k) {
  Plan p{"TIFF"};
  const bool ii = !k.big_endian, fill1 = k.fill_order == 1, unsigned_ = k.sample_format == 1;
  const uint32_t ph = k.photometric;
  if (k.fill_order != 1 && k.fill_order != 2) return std::nullopt;
  if (!unsigned_ &&
      !(k.sample_format == 2 && ph == 1 && AllBits(k, 16, 1) && fill1 && k.extra.empty())) {
    return std::nullopt;
  }
  if ((ph == 0 || ph == 1) && k.extra.empty() && k.bits.size() == 1) {
    const uint32_t bits = k.bits[0];
    if (bits == 1 || bits == 2 || bits == 4 || bits == 8)
      return p;  // "1", "L;2", "L", ... (fill 1 or 2)
    p.rule = Rule::kGrayClip;
    p.detail = "grayscale clipped at 255 as Pillow's convert(\"RGB\") does";
    if (bits == 12 && ii && ph == 1 && fill1) {  // "I;12"; GraphicsMagick shifts it up by 4
      p.gray_shift = 4;
      p.detail = "12-bit " + p.detail;
      return p;
    }
    if (bits != 16) return std::nullopt;  // 32-bit integers and floats: below
    p.detail = "16-bit " + p.detail;
    if (k.sample_format == 2) {  // "I;16S", "I;16BS": negative values clip to 0
      p.gray_signed = true;
      return p;
    }
    if (ph == 0 && ii && fill1) {  // "I;16": Pillow ignores min-is-white here
      p.gray_inverted = true;
      return p;
    }
    if (ph == 1 && (fill1 || ii)) return p;  // "I;16", "I;16B", "I;16R"
    return std::nullopt;
  }
  if (ph == 1 && AllBits(k, 8, 2) && Extra(k, {2}) && fill1) return p;  // "LA"
  if (ph == 2) {
    if (AllBits(k, 8, 3) && k.extra.empty()) return p;  // "RGB", "RGB;R"
    if (!fill1) return std::nullopt;
    if (AllBits(k, 8, 4) && (Extra(k, {}) || Extra(k, {0}) || Extra(k, {2}) || Extra(k, {999})))
      return p;
    if (AllBits(k, 8, 5) && (Extra(k, {0, 0}) || Extra(k, {2, 0}))) return p;
    if (AllBits(k, 8, 6) && (Extra(k, {0, 0, 0}) || Extra(k, {2, 0, 0}))) return p;
    p.detail = "premultiplied alpha";
    p.rule = Rule::kUnpremultiply;
    if ((AllBits(k, 8, 4) && Extra(k, {1})) || (AllBits(k, 8, 5) && Extra(k, {1, 0})) ||
        (AllBits(k, 8, 6) && Extra(k, {1, 0, 0}))) {
      return p;
    }
    p.detail = "16-bit";
    p.rule = Rule::kHighByte;
    if (AllBits(k, 16, 3) && k.extra.empty()) return p;
    if (AllBits(k, 16, 4) && (Extra(k, {}) || Extra(k, {0}) || Extra(k, {2}))) return p;
    if (AllBits(k, 16, 4) && Extra(k, {1})) {
      p.detail = "16-bit, premultiplied alpha";
      p.rule = Rule::kUnpremultiply;
      return p;
    }
    return std::nullopt;
  }
  if (ph == 3 && k.extra.empty() && k.bits.size() == 1) {  // "P;1" ... "P"
    const uint32_t bits = k.bits[0];
    if (bits == 1 || bits == 2 || bits == 4 || bits == 8) return p;
    return std::nullopt;
  }
  if (ph == 3 && AllBits(k, 8, 2) && Extra(k, {2}) && fill1) return p;  // "PA"
  if (ph == 5 && fill1) {
    p.rule = Rule::kCmyk;
    p.detail = "CMYK";
    if ((AllBits(k, 8, 4) && k.extra.empty()) || (AllBits(k, 8, 5) && Extra(k, {0})) ||
        (AllBits(k, 8, 6) && Extra(k, {0, 0}))) {
      return p;
    }
    p.detail = "16-bit CMYK";
    if (AllBits(k, 16, 4) && k.extra.empty() && ii) return p;
    return std::nullopt;
  }
  if (ph == 6 && AllBits(k, 8, 3) && k.extra.empty() && fill1) {  // libtiff converts to RGB
    p.detail = "YCbCr";
    return p;
  }
  return std::nullopt;  // including Pillow's "LAB", refused by DescribeTiff with its own reason
}

absl::StatusOr<Plan> DescribeTiff(absl::Span<const uint8_t> b) {
  DDPIO_ASSIGN_OR_RETURN(TiffDirectory d, TiffDirectory::Read(b));
  DDPIO_ASSIGN_OR_RETURN(TiffKey k, ReadTiffKey(d));
  const uint32_t bits = k.bits.empty() ? 0 : k.bits[0];
  if (k.photometric == 8 || k.photometric == 9 || k.photometric == 10) {
    return Refuse("TIFF", "in the CIE L*a*b* colour space",
                  "Pillow converts it to RGB through LittleCMS, which ddpio does not reproduce");
  }
  if (bits == 32 || bits == 64 || k.sample_format == 3) {
    return Refuse(
        "TIFF",
        absl::StrCat("with ", bits, "-bit ", k.sample_format == 3 ? "floating-point " : "",
                     "samples ", Describe(k)),
        "GraphicsMagick scales them to 16 bits where Pillow clips their values");
  }
  std::optional<Plan> plan = TiffRule(k);
  if (!plan.has_value()) {
    return Refuse("TIFF", absl::StrCat("with a sample layout Pillow does not open ", Describe(k)),
                  "Pillow cannot open it");
  }
  if (k.photometric == 6 && k.compression == 1) {
    return Refuse("TIFF", "in YCbCr, uncompressed", "Pillow cannot open it");
  }
  if (k.planar == 2 && k.bits.size() > 1) {
    // Pillow reads uncompressed planes itself, one raw mode letter a plane: right for 8-bit RGB,
    // RGBA, RGBX and CMYK only (16-bit planes come out garbled, gray + alpha fails to open).
    // Compressed planes go through libtiff, as in GraphicsMagick.
    const bool raw_ok =
        bits == 8 && ((k.photometric == 2 && (Extra(k, {}) || Extra(k, {0}) || Extra(k, {2}))) ||
                      (k.photometric == 5 && k.extra.empty()));
    if (k.compression == 1 && !raw_ok) {
      return Refuse("TIFF", absl::StrCat("with separate uncompressed planes ", Describe(k)),
                    "Pillow misreads or cannot open them");
    }
    if (plan->rule == Rule::kUnpremultiply) {
      return Refuse("TIFF", "with premultiplied alpha in separate planes",
                    "not verified against Pillow");
    }
  }
  if (k.photometric == 3) {
    // Pillow keeps each 16-bit colour map entry's high byte; GraphicsMagick takes a map whose
    // entries are all below 256 for an 8-bit one and scales it. Such a file shows black in Pillow.
    const std::vector<uint32_t> map = d.Get(320, {});
    if (!map.empty() && *std::max_element(map.begin(), map.end()) < 256) {
      return Refuse("TIFF", "with a palette of 8-bit values in its 16-bit colour map",
                    "Pillow reads every pixel as black where GraphicsMagick scales the map");
    }
  }
  plan->width = d.Get1(256, 0);
  plan->height = d.Get1(257, 0);
  // Pillow transposes by the Orientation tag (TiffImageFile.load_end); GraphicsMagick does not.
  if (const std::vector<uint32_t> o = d.Get(274, {}); o.size() == 1 && o[0] >= 2 && o[0] <= 8) {
    plan->orientation = static_cast<int>(o[0]);
  }
  // Some layouts are read through libtiff's RGBA raster (4 bytes a pixel); transposing copies.
  plan->coder_bytes_per_pixel = 4 + (plan->orientation != 1 ? 3 : 0);
  // Alpha as stored: Pillow takes associated alpha's colours divided out ("RGBa") and every other
  // extra sample as it is, where GraphicsMagick divides out associated alpha itself (and takes
  // four samples without ExtraSamples for associated alpha).
  plan->defines.emplace_back("tiff:alpha", "unspecified");
  return *plan;
}

// ---- BMP ------------------------------------------------------------------------------------

// Walks RLE8/RLE4 pixel data as Pillow 9.4's BmpRleDecoder does, counting what it would produce:
// OK when that is every pixel as GraphicsMagick reads them too. Pillow reads a delta escape as
// four bytes where it has two, drops the last pixel of an odd RLE4 literal run, aligns literal
// runs on the file's (not the pixel data's) even offsets, and fails when the data stops short.
absl::Status CheckRleAsPillowReadsIt(absl::Span<const uint8_t> b, uint64_t offset, uint64_t width,
                                     uint64_t height, bool rle4) {
  const auto refuse = [&](absl::string_view what) {
    return Refuse("BMP", absl::StrCat("with RLE", rle4 ? 4 : 8, " data ", what),
                  "Pillow misreads it");
  };
  const uint64_t total = width * height;
  uint64_t produced = 0, x = 0, at = offset;
  while (produced < total) {
    if (at + 2 > b.size()) break;
    uint64_t n = b[at];
    const uint8_t code = b[at + 1];
    at += 2;
    if (n != 0) {  // a run, clipped at the row's end
      n = x + n > width ? (x < width ? width - x : 0) : n;
      produced += n;
      x += n;
    } else if (code == 0) {  // end of line: the row padded
      if (produced % width != 0) produced += width - produced % width;
      x = 0;
    } else if (code == 1) {  // end of bitmap
      break;
    } else if (code == 2) {
      return refuse("with a delta escape");
    } else {  // a literal run of `code` pixels
      if (rle4 && code % 2 != 0) return refuse("with an RLE4 literal run of odd length");
      const uint64_t bytes = rle4 ? code / 2 : code;
      if (at + bytes > b.size()) break;
      at += bytes;
      produced += code;
      x += code;
      if (at % 2 != 0) {
        if ((at - offset) % 2 == 0) return refuse("starting at an odd offset");
        ++at;
      } else if ((at - offset) % 2 != 0) {
        return refuse("starting at an odd offset");
      }
    }
  }
  if (produced < total) {
    return Refuse("BMP",
                  absl::StrCat("with RLE", rle4 ? 4 : 8, " data for ", produced, " of its ", total,
                               " pixels"),
                  "Pillow cannot open it");
  }
  return absl::OkStatus();
}

// BITFIELDS: the masks must be one of the layouts Pillow knows (BmpImagePlugin's SUPPORTED).
absl::Status DescribeBmpMasks(absl::Span<const uint8_t> b, uint32_t header, int bits, Plan* plan) {
  const size_t masks_at = 14 + 40;  // in the header from 52 bytes on, else just after it
  if (b.size() < masks_at + 12) return absl::DataLossError("BMP shorter than its colour masks");
  const uint32_t r = Le32(b, masks_at), g = Le32(b, masks_at + 4), bl = Le32(b, masks_at + 8);
  const uint32_t a = header >= 52 ? Le32(b, masks_at + 12) : 0;
  const auto is = [&](uint32_t R, uint32_t G, uint32_t B, uint32_t A) {
    return r == R && g == G && bl == B && a == A;
  };
  const auto rgb_is = [&](uint32_t R, uint32_t G, uint32_t B) {
    return r == R && g == G && bl == B;
  };
  if (bits == 32 && is(0, 0, 0, 0)) {
    // Pillow reads zero masks as B, G, R, A bytes; GraphicsMagick needs to be told so.
    std::string patched(reinterpret_cast<const char*>(b.data()), b.size());
    const uint32_t masks[] = {0xFF0000, 0xFF00, 0xFF, 0xFF000000};
    for (size_t i = 0; i < (header >= 52 ? 4u : 3u); ++i)
      EncodeFixed32(&patched[masks_at + 4 * i], masks[i]);
    plan->patched = std::move(patched);
    return absl::OkStatus();
  }
  if (bits == 32 &&
      (is(0xFF0000, 0xFF00, 0xFF, 0) || is(0xFF000000, 0xFF0000, 0xFF00, 0) ||
       is(0xFF000000, 0xFF0000, 0xFF00, 0xFF) || is(0xFF, 0xFF00, 0xFF0000, 0xFF000000) ||
       is(0xFF0000, 0xFF00, 0xFF, 0xFF000000))) {
    return absl::OkStatus();
  }
  if (bits == 24 && rgb_is(0xFF0000, 0xFF00, 0xFF)) return absl::OkStatus();
  if (bits == 16 && (rgb_is(0xF800, 0x7E0, 0x1F) || rgb_is(0x7C00, 0x3E0, 0x1F))) {
    plan->rule = g == 0x7E0 ? Rule::kBgr16 : Rule::kBgr15;
    plan->detail = "16-bit";
    return absl::OkStatus();
  }
  return Refuse("BMP",
                absl::StrCat("with ", bits, "-bit colour masks ", r, ", ", g, ", ", bl, ", ", a),
                "Pillow cannot open it");
}

// Pillow drops a palette that is a grey ramp (entry i = (i, i, i); for two colours black and
// white) and reads the pixels as mode "L" or "1" — right only for 8 bits ("L") or 1 bit ("1"),
// and for RLE data as "L".
absl::Status CheckBmpGreyPalette(absl::Span<const uint8_t> b, uint32_t header, int bits, bool rle) {
  const uint32_t declared = header == 12 ? 0 : Le32(b, 46);
  const uint64_t colors = declared != 0 ? declared : uint64_t{1} << bits;
  if (colors > 65536) {
    return Refuse("BMP", absl::StrCat("with ", colors, " palette entries"),
                  "Pillow cannot open it");
  }
  const bool two = colors == 2;
  const size_t entry = header == 12 ? 3 : 4, palette_at = 14 + size_t{header};
  for (uint64_t i = 0; i < (two ? 2 : colors); ++i) {
    const uint64_t want = two ? (i == 0 ? 0 : 255) : i;
    const size_t at = palette_at + i * entry;
    if (want > 255 || at + 3 > b.size() || b[at] != want || b[at + 1] != want ||
        b[at + 2] != want) {
      return absl::OkStatus();  // a real palette: expanded by both
    }
  }
  if (rle ? two : (two ? bits != 1 : bits != 8)) {
    return Refuse(
        "BMP", absl::StrCat("of ", bits, " bits a pixel with a ", colors, "-entry grey palette"),
        absl::StrCat("Pillow reads it as mode \"", two ? "1" : "L", "\" and misplaces its pixels"));
  }
  return absl::OkStatus();
}

// BmpImagePlugin._bitmap: header, depth and compression decide the raw mode.
absl::StatusOr<Plan> DescribeBmp(absl::Span<const uint8_t> b) {
  if (b.size() < 18) return absl::DataLossError("BMP shorter than its header");
  const uint32_t header = Le32(b, 14);
  if (header != 12 && header != 40 && header != 64 && header != 108 && header != 124) {
    return Refuse("BMP", absl::StrCat("with a ", header, "-byte header"), "Pillow cannot open it");
  }
  if (b.size() < 14 + uint64_t{header}) return absl::DataLossError("BMP shorter than its header");
  Plan plan{"BMP"};
  plan.coder_bytes_per_pixel = 4;  // GraphicsMagick reads the pixel rows whole
  if (header == 12) {
    plan.width = Le16(b, 18);
    plan.height = Le16(b, 20);
  } else {
    plan.width = static_cast<uint64_t>(std::abs(int64_t{static_cast<int32_t>(Le32(b, 18))}));
    plan.height = static_cast<uint64_t>(std::abs(int64_t{static_cast<int32_t>(Le32(b, 22))}));
  }
  const int bits = header == 12 ? Le16(b, 24) : Le16(b, 28);
  const uint32_t compression = header == 12 ? 0 : Le32(b, 30);
  if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32) {
    return Refuse("BMP", absl::StrCat("of ", bits, " bits a pixel"), "Pillow cannot open it");
  }
  if (compression == 3) {
    DDPIO_RETURN_IF_ERROR(DescribeBmpMasks(b, header, bits, &plan));
    return plan;
  }
  const bool rle = compression == 1 || compression == 2;
  if (compression != 0 && !rle) {
    return Refuse("BMP", absl::StrCat("with compression ", compression), "Pillow cannot open it");
  }
  if (rle && bits != (compression == 1 ? 8 : 4)) {
    return Refuse("BMP",
                  absl::StrCat("with RLE", compression == 1 ? 8 : 4, " compression of ", bits,
                               " bits a pixel"),
                  "Pillow cannot open it");
  }
  if (bits == 16) {  // "BGR;15"
    plan.rule = Rule::kBgr15;
    plan.detail = "16-bit";
  }
  if (bits > 8) return plan;
  const uint32_t offset = Le32(b, 10);
  if (offset == 14 + header) {  // Pillow then looks for the pixels after where a palette would be
    return Refuse("BMP", "whose pixel data starts where its palette should",
                  "Pillow reads it elsewhere");
  }
  if (rle)
    DDPIO_RETURN_IF_ERROR(
        CheckRleAsPillowReadsIt(b, offset, plan.width, plan.height, compression == 2));
  DDPIO_RETURN_IF_ERROR(CheckBmpGreyPalette(b, header, bits, rle));
  return plan;
}

}  // namespace

absl::StatusOr<Plan> DescribeHeader(const std::string& format, absl::Span<const uint8_t> bytes) {
  if (format == "PNG") return DescribePng(bytes);
  if (format == "TIFF") return DescribeTiff(bytes);
  if (format == "BMP") return DescribeBmp(bytes);
  Plan webp{"WebP"};               // always 8-bit RGB(A)
  webp.coder_bytes_per_pixel = 5;  // libwebp's RGBA output
  return webp;
}

absl::Status Refuse(absl::string_view format, absl::string_view what, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat(format, " ", what, ": ", why,
                   "; ddpio stores only what it converts exactly as Pillow's "
                   "convert(\"RGB\") does (convert the file to 8-bit RGB first)"));
}

absl::Status CheckBudget(absl::string_view name, uint64_t width, uint64_t height,
                         uint64_t bytes_per_pixel, const ImageDecodeOptions& o) {
  const uint64_t pixels = width * height;  // both below 2^32: no overflow
  if (pixels <= o.max_decode_bytes / bytes_per_pixel) return absl::OkStatus();
  constexpr uint64_t kMiB = 1 << 20;
  const auto size = [&](double bytes) {
    return bytes < kMiB ? absl::StrCat(bytes, " bytes")
                        : absl::StrCat(std::ceil(bytes / kMiB), " MiB");
  };
  return WithSetting(
      absl::DataLossError(
          absl::StrCat("decoding this ", width, "x", height, " ", name, " needs about ",
                       size(static_cast<double>(pixels) * static_cast<double>(bytes_per_pixel)),
                       " (", bytes_per_pixel, " bytes a pixel), more than the decoding budget of ",
                       size(static_cast<double>(o.max_decode_bytes)),
                       " per image (a decompression bomb? or raise the budget, max_decode_bytes, "
                       "which every converting "
                       "thread may then use)")),
      "max_decode_bytes");
}

bool StartsWith(absl::Span<const uint8_t> b, absl::string_view magic, size_t at) {
  return b.size() >= at + magic.size() &&
         std::memcmp(b.data() + at, magic.data(), magic.size()) == 0;
}

}  // namespace ddpio::convert::internal
