// What Pillow makes of a PNG, TIFF, BMP or WebP image's samples, read from the file's own header
// (PNG's IHDR, TIFF's first directory, BMP's info header): the plan image_decode.cc follows to
// turn GraphicsMagick's 16-bit samples into exactly the 8-bit values of Pillow's convert("RGB").
// Also the checks every decoder of the module shares (the decoding budget, refusals). Internal to
// the convert module.
#ifndef DDPIO_CONVERT_INTERNAL_IMAGE_PLAN_H_
#define DDPIO_CONVERT_INTERNAL_IMAGE_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ddpio/convert/image_decode.h"

namespace ddpio::convert::internal {

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

// The plan for `format` ("PNG", "TIFF", "BMP" or "WEBP", as SniffImageFormat says) from the
// file's header; DataLoss naming what Pillow would do differently, or what is malformed.
absl::StatusOr<Plan> DescribeHeader(const std::string& format, absl::Span<const uint8_t> bytes);

// DataLoss: `format`'s `what` is not converted as Pillow converts it, because `why`.
absl::Status Refuse(absl::string_view format, absl::string_view what, absl::string_view why);

// DataLoss naming the budget and its setting when `width` x `height` pixels at `bytes_per_pixel`
// would take more than options.max_decode_bytes.
absl::Status CheckBudget(absl::string_view name, uint64_t width, uint64_t height,
                         uint64_t bytes_per_pixel, const ImageDecodeOptions& o);

// Whether `b` holds `magic` at offset `at`.
bool StartsWith(absl::Span<const uint8_t> b, absl::string_view magic, size_t at = 0);

}  // namespace ddpio::convert::internal

#endif  // DDPIO_CONVERT_INTERNAL_IMAGE_PLAN_H_
