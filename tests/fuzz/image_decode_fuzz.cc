// Non-JPEG source images (PNG, WebP, BMP, TIFF, PPM/PGM/PBM) as `ddpio convert` decodes them:
// ddpio's own header readers (PNG IHDR, TIFF directory, BMP info header, PNM) and GraphicsMagick.
// Whatever the bytes, a DataLoss or an image of at most the pixel limit — never a crash, a
// delegate or memory beyond the decoding budget.
#include <cstdint>

#include "ddpio/convert/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddpio::convert::ImageDecodeOptions options;
  options.max_pixels = 1 << 20;
  options.max_decode_bytes = 64 << 20;
  auto image = ddpio::convert::DecodeImage(absl::MakeConstSpan(data, size), options);
  if (image.ok() && (static_cast<uint64_t>(image->width) * image->height > options.max_pixels ||
                     image->rgb.size() != static_cast<size_t>(image->width) * image->height * 3)) {
    __builtin_trap();
  }
  return 0;
}
