#include "ddpio/loader/jpeg.h"

#include <turbojpeg.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::loader {

bool LooksLikeJpeg(absl::Span<const uint8_t> b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

const char* DescribeNonJpeg(absl::Span<const uint8_t> b) {
  if (b.empty()) return "empty file";
  if (b.size() >= 8 && b[0] == 0x89 && b[1] == 'P' && b[2] == 'N' && b[3] == 'G')
    return "PNG image";
  if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') return "BMP image";
  if (b.size() >= 4 && b[0] == 'G' && b[1] == 'I' && b[2] == 'F') return "GIF image";
  if (b.size() >= 12 && b[0] == 'R' && b[1] == 'I' && b[2] == 'F' && b[3] == 'F' && b[8] == 'W')
    return "WebP image";
  if (b.size() >= 4 && ((b[0] == 'I' && b[1] == 'I') || (b[0] == 'M' && b[1] == 'M')))
    return "TIFF image";
  return "not a JPEG (no FF D8 FF start marker)";
}

void JpegDecoder::HandleCloser::operator()(void* handle) const {
  if (handle != nullptr) tjDestroy(handle);
}

absl::Status CheckImagePixels(int64_t width, int64_t height, uint64_t max_pixels,
                              absl::string_view format) {
  const uint64_t pixels = static_cast<uint64_t>(std::max<int64_t>(width, 0)) *
                          static_cast<uint64_t>(std::max<int64_t>(height, 0));
  if (pixels > max_pixels) {
    return WithSetting(
        absl::DataLossError(
            absl::StrCat("the ", format, " declares ", width, "x", height, " = ", pixels,
                         " pixels, more than the limit of ", max_pixels,
                         " (a decompression bomb? the limit is the decoder's max_pixels setting, ",
                         kDefaultMaxImagePixels, " by default)")),
        "max_pixels");
  }
  return absl::OkStatus();
}

absl::StatusOr<JpegDecoder> JpegDecoder::Create(uint64_t max_pixels) {
  tjhandle h = tjInitDecompress();
  if (h == nullptr) {
    return absl::InternalError(absl::StrCat("tjInitDecompress: ", tjGetErrorStr2(nullptr)));
  }
  return JpegDecoder(h, max_pixels);
}

absl::Status JpegDecoder::Fail(absl::Status error) {
  tjhandle fresh = tjInitDecompress();
  if (fresh != nullptr) handle_.reset(fresh);
  return error;
}

absl::StatusOr<JpegInfo> JpegDecoder::ReadInfo(absl::Span<const uint8_t> bytes) {
  if (!LooksLikeJpeg(bytes)) return absl::DataLossError(DescribeNonJpeg(bytes));
  JpegInfo info;
  if (tjDecompressHeader3(handle_.get(), bytes.data(), bytes.size(), &info.width, &info.height,
                          &info.subsampling, &info.colorspace) != 0) {
    return Fail(
        absl::DataLossError(absl::StrCat("corrupt JPEG header: ", tjGetErrorStr2(handle_.get()))));
  }
  if (info.width <= 0 || info.height <= 0) {
    return Fail(
        absl::DataLossError(absl::StrCat("JPEG with invalid size ", info.width, "x", info.height)));
  }
  if (absl::Status st = CheckImagePixels(info.width, info.height, max_pixels_); !st.ok())
    return Fail(st);
  switch (info.colorspace) {
    case TJCS_GRAY:
      info.channels = 1;
      break;
    case TJCS_CMYK:
    case TJCS_YCCK:
      info.channels = 4;
      break;
    default:
      info.channels = 3;
  }
  return info;
}

absl::Status JpegDecoder::Decode(absl::Span<const uint8_t> bytes, const JpegInfo& info,
                                 std::vector<uint8_t>* out) {
  int format = info.channels == 1 ? TJPF_GRAY : info.channels == 4 ? TJPF_CMYK : TJPF_RGB;
  out->resize(static_cast<size_t>(info.width) * info.height * info.channels);
  int rc = tjDecompress2(handle_.get(), bytes.data(), bytes.size(), out->data(), info.width,
                         /*pitch=*/0, info.height, format, TJFLAG_STOPONWARNING);
  if (rc != 0) {
    const bool warning = tjGetErrorCode(handle_.get()) == TJERR_WARNING;
    return Fail(absl::DataLossError(absl::StrCat(
        warning ? "corrupt JPEG data: " : "JPEG decode failed: ", tjGetErrorStr2(handle_.get()))));
  }
  return absl::OkStatus();
}

}  // namespace ddpio::loader
