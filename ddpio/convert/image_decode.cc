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
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/internal/image_plan.h"
#include "ddpio/convert/internal/pnm_decode.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_region.h"

// The reference for every conversion rule is Pillow 9.4 (Debian 12's python3-pil); the rules are
// read from each file's header in internal/image_plan.cc, PPM/PGM/PBM are parsed in
// internal/pnm_decode.cc. python/tests/test_colour_spaces.py checks each rule pixel for pixel
// against Pillow itself.

namespace ddpio::convert {
namespace {

using internal::CheckBudget;
using internal::Plan;
using internal::Refuse;
using internal::Rule;
using internal::StartsWith;

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
  DDPIO_ASSIGN_OR_RETURN(const Plan plan, internal::DescribeHeader(format, bytes));
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
  if (format == "PNM") return internal::DecodePnm(bytes, options);
  return DecodeWithMagick(format, bytes, options);
}

absl::StatusOr<DecodedImage> DecodeImage(absl::Span<const uint8_t> bytes, uint64_t max_pixels) {
  ImageDecodeOptions options;
  options.max_pixels = max_pixels;
  return DecodeImage(bytes, options);
}

}  // namespace ddpio::convert
