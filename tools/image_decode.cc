#include "tools/image_decode.h"

// GraphicsMagick's C API (magick/api.h needs <sys/types.h> and <stdio.h> first).
#include <magick/api.h>
#include <sys/types.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/jpeg.h"

namespace ddpio::tools {
namespace {

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
  std::string message(const char* what) const {
    return absl::StrCat(what, ": ", e_.reason ? e_.reason : "failed",
                        e_.description ? absl::StrCat(" (", e_.description, ")") : "");
  }

 private:
  ExceptionInfo e_;
};

bool StartsWith(absl::Span<const uint8_t> b, std::string_view magic, size_t at = 0) {
  return b.size() >= at + magic.size() &&
         std::memcmp(b.data() + at, magic.data(), magic.size()) == 0;
}

// PNG's IHDR says what Pillow makes of the image: bit depth (byte 24) and colour type (25).
bool IsSixteenBitGrayPng(absl::Span<const uint8_t> b) {
  return b.size() > 25 && b[24] == 16 && (b[25] == 0 || b[25] == 4);
}

}  // namespace

std::string SniffImageFormat(absl::Span<const uint8_t> b) {
  if (StartsWith(b, "\x89PNG\r\n\x1a\n")) return "PNG";
  if (StartsWith(b, "RIFF") && StartsWith(b, "WEBP", 8)) return "WEBP";
  if (StartsWith(b, "BM")) return "BMP";
  if (StartsWith(b, std::string_view("II*\0", 4)) || StartsWith(b, std::string_view("MM\0*", 4)))
    return "TIFF";
  if (b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6') return "PNM";
  return "";
}

absl::StatusOr<DecodedImage> DecodeImage(absl::Span<const uint8_t> bytes, uint64_t max_pixels) {
  const std::string format = SniffImageFormat(bytes);
  if (format.empty()) {
    return absl::DataLossError(absl::StrCat("not a PNG, WebP, BMP, TIFF, PPM or PGM image (",
                                            loader::DescribeNonJpeg(bytes), ")"));
  }
  DDPIO_RETURN_IF_ERROR(InitOnce());
  ImageInfoPtr info(CloneImageInfo(nullptr));
  // The coder is ours to choose: GraphicsMagick must not guess from the bytes (a PostScript or
  // SVG body would reach a delegate). Only the first frame of a multi-frame file, as Pillow.
  std::snprintf(info->magick, sizeof(info->magick), "%s", format.c_str());
  std::snprintf(info->filename, sizeof(info->filename), "%s:-", format.c_str());
  info->affirm = MagickTrue;
  info->subimage = 0;
  info->subrange = 1;
  {
    Exception e;
    ImagePtr pinged(PingBlob(info.get(), bytes.data(), bytes.size(), e.get()));
    if (pinged == nullptr || e.raised()) return absl::DataLossError(e.message(format.c_str()));
    DDPIO_RETURN_IF_ERROR(loader::CheckImagePixels(static_cast<int64_t>(pinged->columns),
                                                   static_cast<int64_t>(pinged->rows), max_pixels));
  }
  Exception e;
  ImagePtr image(BlobToImage(info.get(), bytes.data(), bytes.size(), e.get()));
  if (image == nullptr || e.raised()) return absl::DataLossError(e.message(format.c_str()));
  DecodedImage out;
  out.format = format;
  out.width = static_cast<int>(image->columns);
  out.height = static_cast<int>(image->rows);
  DDPIO_RETURN_IF_ERROR(loader::CheckImagePixels(out.width, out.height, max_pixels));
  // 16-bit samples: Pillow keeps the high byte of RGB ("RGB;16B"), but opens 16-bit grayscale
  // as mode "I", whose convert("RGB") clips at 255. Read every sample at 16 bits and apply the
  // same rule. (GraphicsMagick is built with 16-bit quanta: 8-bit samples come back as v * 257.)
  const size_t n = static_cast<size_t>(out.width) * out.height * 3;
  std::vector<uint16_t> wide(n);
  if (DispatchImage(image.get(), 0, 0, image->columns, image->rows, "RGB", ShortPixel, wide.data(),
                    e.get()) != MagickPass ||
      e.raised()) {
    return absl::DataLossError(e.message(format.c_str()));
  }
  const bool gray16 =
      image->depth > 8 && (format == "PNG" ? IsSixteenBitGrayPng(bytes) : image->is_grayscale != 0);
  out.rgb.resize(n);
  for (size_t i = 0; i < n; ++i) {
    out.rgb[i] = gray16 ? static_cast<uint8_t>(std::min<uint16_t>(wide[i], 255))
                        : static_cast<uint8_t>(wide[i] >> 8);
  }
  if (gray16)
    out.detail = "16-bit grayscale, clipped at 255 as Pillow's convert(\"RGB\") does";
  else if (image->depth > 8)
    out.detail = "16-bit";
  return out;
}

}  // namespace ddpio::tools
