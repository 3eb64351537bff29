// Decoding the non-JPEG images torchvision's ImageFolder accepts — PNG, WebP, BMP, TIFF, PPM and
// PGM — into the RGB pixels Pillow's `Image.open(f).convert("RGB")` gives (what torchvision's
// default loader returns), with GraphicsMagick. `ddpio convert` stores the result as a raw
// uint8 record (docs/FORMAT.md), so the loader never needs these decoders.
//
// Only these formats are decoded: the format is sniffed from the bytes and GraphicsMagick is told
// which coder to use, so a file named .png holding PostScript or SVG is refused, never handed to
// a delegate. Thread-safe.
#ifndef DDPIO_TOOLS_IMAGE_DECODE_H_
#define DDPIO_TOOLS_IMAGE_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddpio::tools {

struct DecodedImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3 bytes, rows top to bottom, RGB interleaved
  std::string format;        // "PNG", "WEBP", "BMP", "TIFF" or "PNM"
  std::string detail;        // what was converted, e.g. "16-bit grayscale", "palette + alpha"
};

// "PNG", "WEBP", "BMP", "TIFF" or "PNM" when `bytes` start like one; "" otherwise.
std::string SniffImageFormat(absl::Span<const uint8_t> bytes);

// DataLoss when `bytes` are not one of those formats, are corrupt or truncated, or declare more
// than `max_pixels` (refused before pixel memory is allocated). Internal when GraphicsMagick
// cannot start.
absl::StatusOr<DecodedImage> DecodeImage(absl::Span<const uint8_t> bytes, uint64_t max_pixels);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_IMAGE_DECODE_H_
