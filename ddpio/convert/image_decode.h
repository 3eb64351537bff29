// Decoding the non-JPEG images torchvision's ImageFolder accepts — PNG, WebP, BMP, TIFF, PPM and
// PGM — into the RGB pixels Pillow's `Image.open(f).convert("RGB")` gives (what torchvision's
// default loader returns). `ddpio convert` stores the result as a raw uint8 record
// (docs/FORMAT.md), so the loader never needs these decoders.
//
// GraphicsMagick decodes PNG, WebP, BMP and TIFF; ddpio reads the file's own header first (PNG's
// IHDR, TIFF's first directory, BMP's info header) to learn what Pillow will make of the samples —
// its mode and raw mode — and turns GraphicsMagick's 16-bit samples into exactly those 8-bit
// values: the high byte of 16-bit RGB, 16-bit grayscale clipped at 255, CMYK converted with
// Pillow's integer formula, premultiplied TIFF alpha divided out as Pillow does, 5- and 6-bit BMP
// channels scaled as Pillow scales them. PPM/PGM/PBM are parsed here, following Pillow's rules for
// every maxval. A colour space that Pillow cannot open, or whose conversion ddpio does not
// reproduce exactly (LAB, 32-bit and floating-point TIFF samples, ...), is refused as DataLoss
// naming it, never stored with other colours than Pillow's.
//
// Only these formats are decoded: the format is sniffed from the bytes and GraphicsMagick is told
// which coder to use, so a file named .png holding PostScript or SVG is refused, never handed to
// a delegate. Memory is bounded per call: the header's geometry is checked against a pixel limit
// and the decode's memory against a budget before any pixel memory is allocated.
// Thread-safe; each call needs at most ImageDecodeOptions::max_decode_bytes.
//
//   ImageDecodeOptions options;  // 100 MP, 1 GiB
//   absl::StatusOr<DecodedImage> image = DecodeImage(bytes, options);
#ifndef DDPIO_CONVERT_IMAGE_DECODE_H_
#define DDPIO_CONVERT_IMAGE_DECODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/loader/jpeg.h"

namespace ddpio::convert {

// The default decoding budget: 1 GiB per decode (so per converting thread). Enough for a 60 MP
// TIFF, a 75 MP PNG or any PPM within the pixel limit; a 97 KB PNG declaring 10,000 x 10,000
// zeros (1.3 GB to decode) is refused.
inline constexpr uint64_t kDefaultMaxDecodeBytes = uint64_t{1} << 30;

struct ImageDecodeOptions {
  // Images of more pixels than this are refused from their header (DataLoss). Default: the
  // loader's limit, 100 MP, so every stored image can be loaded.
  uint64_t max_pixels = loader::kDefaultMaxImagePixels;
  // The most memory one decode may need, estimated from the header before decoding
  // (GraphicsMagick's 16-bit pixel cache, the coder's own buffers and the RGB result: 3 to 21
  // bytes per pixel by format). Larger images are refused (DataLoss) rather than decoded. Default
  // kDefaultMaxDecodeBytes; raise it to convert larger images, at that much memory per thread.
  uint64_t max_decode_bytes = kDefaultMaxDecodeBytes;
};

struct DecodedImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3 bytes, rows top to bottom, RGB interleaved
  std::string format;        // "PNG", "WEBP", "BMP", "TIFF" or "PNM"
  std::string detail;  // what was converted, e.g. "16-bit grayscale", "CMYK"; "" for plain RGB
};

// "PNG", "WEBP", "BMP", "TIFF" or "PNM" when `bytes` start like one; "" otherwise.
std::string SniffImageFormat(absl::Span<const uint8_t> bytes);

// DataLoss when `bytes` are not one of those formats, are corrupt or truncated, hold a colour
// space ddpio cannot convert as Pillow does (the message names it), declare more than
// `options.max_pixels`, or need more than `options.max_decode_bytes` to decode (both refused
// before pixel memory is allocated; the message names the limit and the setting). Internal when
// GraphicsMagick cannot start.
absl::StatusOr<DecodedImage> DecodeImage(absl::Span<const uint8_t> bytes,
                                         const ImageDecodeOptions& options);

// DecodeImage with `max_pixels` and the default budget.
absl::StatusOr<DecodedImage> DecodeImage(absl::Span<const uint8_t> bytes, uint64_t max_pixels);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_IMAGE_DECODE_H_
