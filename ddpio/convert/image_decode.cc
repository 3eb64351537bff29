#include "ddpio/convert/image_decode.h"

// GraphicsMagick's C API (magick/api.h needs <sys/types.h> and <stdio.h> first).
#include <magick/api.h>
#include <sys/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_region.h"

// The reference for every rule below is Pillow 9.4 (Debian 12's python3-pil): PngImagePlugin's
// _MODES, TiffImagePlugin's OPEN_INFO and _setup, BmpImagePlugin._bitmap, PpmImagePlugin, and
// Convert.c / Unpack.c for what each mode and raw mode becomes in convert("RGB").
// python/tests/test_colour_spaces.py checks each rule pixel for pixel against Pillow itself.

namespace ddpio::convert {
namespace {

// ---------------------------------------------------------------------------------------------
// GraphicsMagick plumbing

// GraphicsMagick once per process: no signal handlers of its own (ddpio's tools handle SIGINT),
// nothing printed, one thread per decode (GraphicsMagick is built with OpenMP; the converter
// already runs one decode per core), and resource limits that a forged header cannot pass.
absl::Status InitOnce() {
  static absl::Status status = [] {
    ExceptionInfo exception;
    GetExceptionInfo(&exception);
    const bool ok =
        InitializeMagickEx(nullptr, MAGICK_OPT_NO_SIGNAL_HANDER, &exception) == MagickPass;
    absl::Status st =
        ok ? absl::OkStatus()
           : absl::InternalError(absl::StrCat("GraphicsMagick did not start: ",
                                              exception.reason ? exception.reason : "unknown"));
    DestroyExceptionInfo(&exception);
    SetWarningHandler([](const ExceptionType, const char*, const char*) {});
    SetErrorHandler([](const ExceptionType, const char*, const char*) {});
    SetMagickResourceLimit(ThreadsResource, 1);
    SetMagickResourceLimit(WidthResource, 65535);
    SetMagickResourceLimit(HeightResource, 65535);
    SetMagickResourceLimit(PixelsResource,
                           static_cast<magick_int64_t>(loader::kDefaultMaxImagePixels));
    SetMagickResourceLimit(DiskResource, 0);  // never a pixel cache on disk
    return st;
  }();
  return status;
}

struct ImageInfoDeleter {
  void operator()(ImageInfo* p) const { DestroyImageInfo(p); }
};
struct ImageDeleter {
  void operator()(Image* p) const { DestroyImageList(p); }
};
using ImageInfoPtr = std::unique_ptr<ImageInfo, ImageInfoDeleter>;
using ImagePtr = std::unique_ptr<Image, ImageDeleter>;

class Exception {
 public:
  Exception() { GetExceptionInfo(&e_); }
  ~Exception() { DestroyExceptionInfo(&e_); }
  Exception(const Exception&) = delete;
  Exception& operator=(const Exception&) = delete;
  ExceptionInfo* get() { return &e_; }
  // A warning counts: GraphicsMagick reports truncated and corrupt data as warnings and hands
  // back an image with grey or black rows, which would be a silently wrong sample.
  bool raised() const { return e_.severity >= WarningException; }
  std::string message(absl::string_view what) const {
    return absl::StrCat(what, ": ", e_.reason ? e_.reason : "failed",
                        e_.description ? absl::StrCat(" (", e_.description, ")") : "");
  }

 private:
  ExceptionInfo e_;
};

bool StartsWith(absl::Span<const uint8_t> b, absl::string_view magic, size_t at = 0) {
  return b.size() >= at + magic.size() &&
         std::memcmp(b.data() + at, magic.data(), magic.size()) == 0;
}

uint32_t Be32(absl::Span<const uint8_t> b, size_t at) { return DecodeBigEndian32(b.data() + at); }
uint32_t Le32(absl::Span<const uint8_t> b, size_t at) { return DecodeFixed32(b.data() + at); }
uint16_t Le16(absl::Span<const uint8_t> b, size_t at) { return DecodeFixed16(b.data() + at); }

// ---------------------------------------------------------------------------------------------
// What Pillow makes of the samples: a plan per image, read from the file's own header

// How GraphicsMagick's 16-bit samples (8-bit ones come back as v * 257) become Pillow's RGB.
enum class Rule {
  kHighByte,       // the high byte: 8-bit samples exactly, 16-bit ones as Pillow's ";16" raw modes
  kGrayClip,       // Pillow's modes "I" and "I;16": the sample's value, clipped at 255
  kUnpremultiply,  // TIFF associated alpha (raw mode "RGBa"): c * 255 / a on the high bytes
  kCmyk,           // TIFF CMYK: Pillow's cmyk2rgb on the high bytes
  kBgr15,          // 16-bit BMP, 5 bits a channel ("BGR;15"): v * 255 / 31
  kBgr16,          // 16-bit BMP, 5-6-5 ("BGR;16"): v * 255 / 31, green v * 255 / 63
};

struct Plan {
  std::string name;                // for messages: "PNG", "TIFF", ...
  uint64_t width = 0, height = 0;  // as the header declares them (0: not read here)
  Rule rule = Rule::kHighByte;
  int gray_shift = 0;          // kGrayClip: the file's value is GraphicsMagick's sample >> shift
  bool gray_inverted = false;  // kGrayClip: GraphicsMagick inverted min-is-white; Pillow does not
  bool gray_signed = false;    // kGrayClip: signed 16-bit samples (GraphicsMagick: the raw bits)
  int orientation = 1;         // TIFF: Pillow applies the Orientation tag when loading
  // Bytes a pixel that the coder allocates beyond GraphicsMagick's pixel cache.
  int coder_bytes_per_pixel = 0;
  std::string detail;                  // DecodedImage::detail
  std::optional<std::string> patched;  // bytes to decode instead of the file's (see DescribeBmp)
  std::vector<std::pair<std::string, std::string>> defines;  // GraphicsMagick -define key=value
};

const char* MapFor(Rule rule) {
  switch (rule) {
    case Rule::kUnpremultiply:
      return "RGBA";
    case Rule::kCmyk:
      return "CMYK";
    default:
      return "RGB";
  }
}

absl::Status Refuse(absl::string_view format, absl::string_view what, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat(format, " ", what, ": ", why,
                   "; ddpio stores only what it converts exactly as Pillow's "
                   "convert(\"RGB\") does (convert the file to 8-bit RGB first)"));
}

// PNG: IHDR's bit depth and colour type give Pillow's mode (PngImagePlugin._MODES).
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

// ---------------------------------------------------------------------------------------------
// PPM, PGM, PBM: parsed here, as PpmImagePlugin does (GraphicsMagick scales raw samples of
// maxvals other than 255 and 65535 in its own way).

class PnmReader {
 public:
  explicit PnmReader(absl::Span<const uint8_t> b) : b_(b) {}

  // PpmImageFile._read_token: whitespace ends a token; '#' skips to the end of the line and
  // the token continues after it; at most 10 characters.
  absl::StatusOr<uint64_t> Number(absl::string_view what) {
    std::string token;
    while (token.size() <= 10) {
      if (at_ >= b_.size()) break;
      const char c = static_cast<char>(b_[at_++]);
      if (IsSpace(c)) {
        if (token.empty()) continue;
        break;
      }
      if (c == '#') {
        while (at_ < b_.size() && b_[at_] != '\r' && b_[at_] != '\n') ++at_;
        if (at_ < b_.size()) ++at_;
        continue;
      }
      token += c;
    }
    if (token.empty() || token.size() > 10 ||
        !std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return absl::DataLossError(
          absl::StrCat("malformed PNM header: its ", what, " is not a number"));
    }
    return std::stoull(token);
  }

  static bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
  absl::Span<const uint8_t> rest() const { return b_.subspan(std::min(at_, b_.size())); }

 private:
  absl::Span<const uint8_t> b_;
  size_t at_ = 2;  // after the magic number
};

// round(v / maxval * out_max) in Python's float arithmetic (round half to even).
uint8_t PillowPnmValue(uint64_t v, uint64_t maxval, bool mode_i) {
  const double out_max = mode_i ? 65535 : 255;
  const double scaled =
      std::min(out_max, std::nearbyint(static_cast<double>(v) / maxval * out_max));
  return static_cast<uint8_t>(std::min(scaled, 255.0));  // mode "I": convert("RGB") clips
}

// The ASCII samples of P1, P2 and P3 as PpmPlainDecoder reads them: a comment runs from '#' to
// the end of its line, which it takes with it (so "12#x\n3" is 123); P1 samples are single
// characters, whitespace optional. Calls `visit(index, value)` for the first `count` samples.
template <typename Visit>
absl::Status ReadPlainSamples(absl::Span<const uint8_t> data, bool bits, size_t count,
                              Visit visit) {
  size_t n = 0;
  std::string token;
  const auto flush = [&]() -> absl::Status {
    if (token.empty() || n == count) return absl::OkStatus();
    if (!std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return absl::DataLossError(absl::StrCat("PNM sample \"", token, "\" is not a number"));
    }
    DDPIO_RETURN_IF_ERROR(visit(n++, std::stoull(token)));
    token.clear();
    return absl::OkStatus();
  };
  for (size_t i = 0; i < data.size() && n < count; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '#') {
      while (i + 1 < data.size() && data[i + 1] != '\r' && data[i + 1] != '\n') ++i;
      ++i;  // the end of the line goes with the comment
      continue;
    }
    if (PnmReader::IsSpace(c)) {
      DDPIO_RETURN_IF_ERROR(flush());
      continue;
    }
    if (bits) {
      if (c != '0' && c != '1') return absl::DataLossError("PBM sample that is not 0 or 1");
      DDPIO_RETURN_IF_ERROR(visit(n++, c == '1'));
      continue;
    }
    token += c;
    if (token.size() > 10) return absl::DataLossError("PNM sample of more than 10 digits");
  }
  DDPIO_RETURN_IF_ERROR(flush());
  if (n < count)
    return absl::DataLossError(absl::StrCat("truncated PNM: ", n, " of ", count, " samples"));
  return absl::OkStatus();
}

// DataLoss naming the budget and its setting when `width` x `height` pixels at `bytes_per_pixel`
// would take more than options.max_decode_bytes.
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

absl::StatusOr<DecodedImage> DecodePnm(absl::Span<const uint8_t> b, const ImageDecodeOptions& o) {
  const char kind = static_cast<char>(b[1]);
  const bool bitmap = kind == '1' || kind == '4', plain = kind <= '3';
  const bool color = kind == '3' || kind == '6';
  const char* name = bitmap ? "PBM" : color ? "PPM" : "PGM";
  if (b.size() < 3 || !PnmReader::IsSpace(static_cast<char>(b[2]))) {
    return absl::DataLossError(
        absl::StrCat("malformed ", name, ": no whitespace after its magic number"));
  }
  PnmReader reader(b);
  DDPIO_ASSIGN_OR_RETURN(const uint64_t width, reader.Number("width"));
  DDPIO_ASSIGN_OR_RETURN(const uint64_t height, reader.Number("height"));
  uint64_t maxval = 1;
  if (!bitmap) {
    DDPIO_ASSIGN_OR_RETURN(maxval, reader.Number("maxval"));
    if (maxval == 0 || maxval > 65535) {
      return absl::DataLossError(absl::StrCat(name, " with maxval ", maxval, " (1 to 65535)"));
    }
  }
  if (width == 0 || height == 0 || width > INT32_MAX || height > INT32_MAX) {
    return absl::DataLossError(absl::StrCat(name, " of ", width, "x", height, " pixels"));
  }
  DDPIO_RETURN_IF_ERROR(loader::CheckImagePixels(static_cast<int64_t>(width),
                                                 static_cast<int64_t>(height), o.max_pixels, name));
  DDPIO_RETURN_IF_ERROR(CheckBudget(name, width, height, 3, o));  // parsed straight into the result
  const bool mode_i = !color && !bitmap && maxval > 255;          // Pillow's mode "I"
  const size_t channels = color ? 3 : 1, count = width * height * channels;
  const size_t sample_bytes = maxval > 255 ? 2 : 1, row_bytes = (width + 7) / 8;
  // Enough bytes for every sample before allocating: a short file cannot claim the budget.
  absl::Span<const uint8_t> data = reader.rest();
  const uint64_t needed = plain    ? (bitmap ? count : 2 * count - 1)
                          : bitmap ? row_bytes * height
                                   : count * sample_bytes;
  if (data.size() < needed) {
    return absl::DataLossError(absl::StrCat("truncated ", name, ": ", data.size(),
                                            " bytes of samples, ", plain ? "at least " : "", needed,
                                            " needed"));
  }
  DecodedImage out;
  out.format = "PNM";
  out.width = static_cast<int>(width);
  out.height = static_cast<int>(height);
  out.rgb.resize(width * height * 3);
  const auto put = [&](size_t sample, uint8_t v) {
    if (color) {
      out.rgb[sample] = v;
    } else {
      std::fill_n(out.rgb.begin() + sample * 3, 3, v);
    }
  };
  if (plain) {
    DDPIO_RETURN_IF_ERROR(ReadPlainSamples(data, bitmap, count, [&](size_t i, uint64_t v) {
      if (v > maxval)
        return absl::DataLossError(absl::StrCat(name, " sample ", v, " above its maxval ", maxval));
      put(i, bitmap ? (v ? 0 : 255) : PillowPnmValue(v, maxval, mode_i));
      return absl::OkStatus();
    }));
  } else if (bitmap) {  // P4: rows of whole bytes, 1 = black
    for (size_t y = 0; y < height; ++y) {
      for (size_t x = 0; x < width; ++x) {
        const bool black = data[y * row_bytes + x / 8] >> (7 - x % 8) & 1;
        put(y * width + x, black ? 0 : 255);
      }
    }
  } else {  // P5, P6: 1 or 2 bytes (big-endian) a sample
    for (size_t i = 0; i < count; ++i) {
      const uint64_t v = sample_bytes == 2 ? DecodeBigEndian16(data.data() + 2 * i) : data[i];
      // maxval 255 and a PGM's 65535 are read raw (mode "L", "I;16B"); the rest scaled.
      if (maxval == 255) {
        put(i, static_cast<uint8_t>(v));
      } else if (maxval == 65535 && mode_i) {
        put(i, static_cast<uint8_t>(std::min<uint64_t>(v, 255)));
      } else {
        put(i, PillowPnmValue(v, maxval, mode_i));
      }
    }
  }
  if (mode_i)
    out.detail = "16-bit grayscale, clipped at 255 as Pillow's convert(\"RGB\") does";
  else if (maxval != 255 && !bitmap)
    out.detail = absl::StrCat("maxval ", maxval);
  return out;
}

// ---------------------------------------------------------------------------------------------
// GraphicsMagick's samples to Pillow's RGB

// `width` pixels of GraphicsMagick samples (MapFor(rule) order, 16 bits) to RGB.
void ConvertRow(const Plan& p, const uint16_t* in, size_t width, uint8_t* out,
                std::vector<uint8_t>* scratch) {
  switch (p.rule) {
    case Rule::kHighByte:
      for (size_t i = 0; i < width * 3; ++i) out[i] = static_cast<uint8_t>(in[i] >> 8);
      return;
    case Rule::kGrayClip:
      for (size_t i = 0; i < width; ++i) {
        uint32_t v = in[3 * i];
        if (p.gray_inverted) v = 65535 - v;
        if (p.gray_signed && v >= 32768) v = 0;
        v >>= p.gray_shift;
        std::fill_n(out + 3 * i, 3, static_cast<uint8_t>(std::min<uint32_t>(v, 255)));
      }
      return;
    case Rule::kUnpremultiply:  // Unpack.c unpackRGBa (and its 16-bit forms on the high bytes)
      for (size_t i = 0; i < width; ++i) {
        const int a = in[4 * i + 3] >> 8;
        for (int c = 0; c < 3; ++c) {
          out[3 * i + c] =
              static_cast<uint8_t>(a == 0 ? 0 : std::min(255, (in[4 * i + c] >> 8) * 255 / a));
        }
      }
      return;
    case Rule::kCmyk: {
      // TIFF stores ink; the loader's converter (Pillow's cmyk2rgb) takes Adobe's inverted form.
      scratch->resize(width * 4);
      for (size_t i = 0; i < width * 4; ++i)
        (*scratch)[i] = static_cast<uint8_t>(255 - (in[i] >> 8));
      loader::CmykToRgb(scratch->data(), width, out);
      return;
    }
    case Rule::kBgr15:
    case Rule::kBgr16:
      // GraphicsMagick widens a 5-bit channel to v << 3 (6-bit: v << 2); Pillow to v * 255 / 31.
      for (size_t i = 0; i < width; ++i) {
        for (int c = 0; c < 3; ++c) {
          const int six = p.rule == Rule::kBgr16 && c == 1;
          const int v = (in[3 * i + c] >> 8) >> (six ? 2 : 3);
          out[3 * i + c] = static_cast<uint8_t>(v * 255 / (six ? 63 : 31));
        }
      }
      return;
  }
}

// Pillow's Image.transpose for TIFF orientations 2-8 (TiffImageFile.load_end).
void Orient(int orientation, DecodedImage* image) {
  const size_t w = image->width, h = image->height;
  const bool swap = orientation >= 5;
  const size_t ow = swap ? h : w, oh = swap ? w : h;
  std::vector<uint8_t> out(image->rgb.size());
  for (size_t y = 0; y < oh; ++y) {
    for (size_t x = 0; x < ow; ++x) {
      size_t sx = x, sy = y;
      switch (orientation) {
        case 2:
          sx = w - 1 - x;
          break;  // FLIP_LEFT_RIGHT
        case 3:
          sx = w - 1 - x;
          sy = h - 1 - y;
          break;  // ROTATE_180
        case 4:
          sy = h - 1 - y;
          break;  // FLIP_TOP_BOTTOM
        case 5:
          sx = y;
          sy = x;
          break;  // TRANSPOSE
        case 6:
          sx = y;
          sy = h - 1 - x;
          break;  // ROTATE_270
        case 7:
          sx = w - 1 - y;
          sy = h - 1 - x;
          break;  // TRANSVERSE
        case 8:
          sx = w - 1 - y;
          sy = x;
          break;  // ROTATE_90
      }
      std::memcpy(&out[(y * ow + x) * 3], &image->rgb[(sy * w + sx) * 3], 3);
    }
  }
  image->rgb = std::move(out);
  image->width = static_cast<int>(ow);
  image->height = static_cast<int>(oh);
}

absl::StatusOr<Plan> Describe(const std::string& format, absl::Span<const uint8_t> bytes) {
  if (format == "PNG") return DescribePng(bytes);
  if (format == "TIFF") return DescribeTiff(bytes);
  if (format == "BMP") return DescribeBmp(bytes);
  Plan webp{"WebP"};               // always 8-bit RGB(A)
  webp.coder_bytes_per_pixel = 5;  // libwebp's RGBA output
  return webp;
}

// GraphicsMagick's pixel cache: 8 bytes a pixel at 16 bits a sample, 2 more for colour indexes.
constexpr uint64_t kPixelCacheBytesPerPixel = 10;

// Reads the first frame of `bytes` with GraphicsMagick's `format` coder, after `check` has passed
// the geometry GraphicsMagick pings (before it allocates pixels).
absl::StatusOr<ImagePtr> ReadWithMagick(
    const std::string& format, absl::Span<const uint8_t> bytes, const Plan& plan,
    const std::function<absl::Status(uint64_t, uint64_t)>& check) {
  DDPIO_RETURN_IF_ERROR(InitOnce());
  ImageInfoPtr info(CloneImageInfo(nullptr));
  // The coder is ours to choose: GraphicsMagick must not guess from the bytes (a PostScript or
  // SVG body would reach a delegate). Only the first frame of a multi-frame file, as Pillow.
  std::snprintf(info->magick, sizeof(info->magick), "%s", format.c_str());
  std::snprintf(info->filename, sizeof(info->filename), "%s:-", format.c_str());
  info->affirm = MagickTrue;
  info->subimage = 0;
  info->subrange = 1;
  for (const auto& [key, value] : plan.defines) {
    Exception e;
    const std::string define = absl::StrCat(key, "=", value);
    if (AddDefinitions(info.get(), define.c_str(), e.get()) != MagickPass) {
      return absl::InternalError(e.message("GraphicsMagick define"));
    }
  }
  size_t columns = 0, rows = 0;
  {
    Exception e;
    ImagePtr pinged(PingBlob(info.get(), bytes.data(), bytes.size(), e.get()));
    if (pinged == nullptr || e.raised()) return absl::DataLossError(e.message(plan.name));
    columns = pinged->columns;
    rows = pinged->rows;
    if (columns == 0 || rows == 0)
      return absl::DataLossError(absl::StrCat(plan.name, " of no pixels"));
    DDPIO_RETURN_IF_ERROR(check(columns, rows));
  }
  Exception e;
  ImagePtr image(BlobToImage(info.get(), bytes.data(), bytes.size(), e.get()));
  if (image == nullptr || e.raised()) return absl::DataLossError(e.message(plan.name));
  if (image->columns != columns || image->rows != rows) {
    return absl::DataLossError(absl::StrCat(plan.name, " decoded to ", image->columns, "x",
                                            image->rows, " pixels where its header declares ",
                                            columns, "x", rows));
  }
  // A colour space the plan did not expect would be converted wrongly.
  const bool cmyk = image->colorspace == CMYKColorspace;
  if (cmyk != (plan.rule == Rule::kCmyk) ||
      (!cmyk && image->colorspace != RGBColorspace && image->colorspace != GRAYColorspace &&
       image->colorspace != TransparentColorspace)) {
    return Refuse(
        plan.name,
        absl::StrCat("that GraphicsMagick decodes in its colour space number ", image->colorspace),
        "not the one ddpio expected from the file's header");
  }
  return image;
}

// The image's samples to Pillow's RGB by `plan`, a band of rows at a time: GraphicsMagick's
// 16-bit samples never exist for the whole image.
absl::StatusOr<DecodedImage> ToRgb(const std::string& format, const Plan& plan, Image* image) {
  const size_t columns = image->columns, rows = image->rows;
  DecodedImage out;
  out.format = format;
  out.width = static_cast<int>(columns);
  out.height = static_cast<int>(rows);
  out.detail = plan.detail;
  out.rgb.resize(columns * rows * 3);
  const char* map = MapFor(plan.rule);
  const size_t per_pixel = std::strlen(map);
  const size_t band = std::max<size_t>(1, (size_t{1} << 20) / (columns * per_pixel));
  std::vector<uint16_t> samples(std::min(band, rows) * columns * per_pixel);
  std::vector<uint8_t> scratch;
  Exception e;
  for (size_t y = 0; y < rows; y += band) {
    const size_t n = std::min(band, rows - y);
    if (DispatchImage(image, 0, static_cast<long>(y), columns, n, map, ShortPixel, samples.data(),
                      e.get()) != MagickPass ||
        e.raised()) {
      return absl::DataLossError(e.message(plan.name));
    }
    for (size_t r = 0; r < n; ++r) {
      ConvertRow(plan, samples.data() + r * columns * per_pixel, columns,
                 out.rgb.data() + (y + r) * columns * 3, &scratch);
    }
  }
  return out;
}

absl::StatusOr<DecodedImage> DecodeWithMagick(const std::string& format,
                                              absl::Span<const uint8_t> bytes,
                                              const ImageDecodeOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(const Plan plan, Describe(format, bytes));
  if (plan.patched.has_value()) {
    bytes = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(plan.patched->data()),
                                plan.patched->size());
  }
  const uint64_t bytes_per_pixel = kPixelCacheBytesPerPixel + plan.coder_bytes_per_pixel + 3;
  const auto check = [&](uint64_t width, uint64_t height) -> absl::Status {
    DDPIO_RETURN_IF_ERROR(
        loader::CheckImagePixels(static_cast<int64_t>(std::min<uint64_t>(width, INT64_MAX)),
                                 static_cast<int64_t>(std::min<uint64_t>(height, INT64_MAX)),
                                 options.max_pixels, plan.name));
    return CheckBudget(plan.name, width, height, bytes_per_pixel, options);
  };
  // The header as ddpio read it, then (in ReadWithMagick) as GraphicsMagick reads it.
  DDPIO_RETURN_IF_ERROR(check(plan.width, plan.height));
  DDPIO_ASSIGN_OR_RETURN(ImagePtr image, ReadWithMagick(format, bytes, plan, check));
  DDPIO_ASSIGN_OR_RETURN(DecodedImage out, ToRgb(format, plan, image.get()));
  image.reset();
  if (plan.orientation != 1) {
    Orient(plan.orientation, &out);
    absl::StrAppend(&out.detail, out.detail.empty() ? "" : ", ", "orientation ", plan.orientation);
  }
  return out;
}

}  // namespace

std::string SniffImageFormat(absl::Span<const uint8_t> b) {
  if (StartsWith(b, "\x89PNG\r\n\x1a\n")) return "PNG";
  if (StartsWith(b, "RIFF") && StartsWith(b, "WEBP", 8)) return "WEBP";
  if (StartsWith(b, "BM")) return "BMP";
  if (StartsWith(b, absl::string_view("II*\0", 4)) || StartsWith(b, absl::string_view("MM\0*", 4)))
    return "TIFF";
  if (b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6') return "PNM";
  return "";
}

absl::StatusOr<DecodedImage> DecodeImage(absl::Span<const uint8_t> bytes,
                                         const ImageDecodeOptions& options) {
  const std::string format = SniffImageFormat(bytes);
  if (format.empty()) {
    return absl::DataLossError(absl::StrCat("not a PNG, WebP, BMP, TIFF, PPM or PGM image (",
                                            loader::DescribeNonJpeg(bytes), ")"));
  }
  if (format == "PNM") return DecodePnm(bytes, options);
  return DecodeWithMagick(format, bytes, options);
}

absl::StatusOr<DecodedImage> DecodeImage(absl::Span<const uint8_t> bytes, uint64_t max_pixels) {
  ImageDecodeOptions options;
  options.max_pixels = max_pixels;
  return DecodeImage(bytes, options);
}

}  // namespace ddpio::convert
