// Non-JPEG source images (PNG, WebP, BMP, TIFF, PPM/PGM) as `ddpio convert` decodes them with
// GraphicsMagick: whatever the bytes, a DataLoss or an image of the declared size, within the
// pixel limit — never a crash, a delegate or unbounded memory.
#include <cstdint>

#include "tools/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kMaxPixels = 1 << 20;
  auto image = ddpio::tools::DecodeImage(absl::MakeConstSpan(data, size), kMaxPixels);
  if (image.ok() && (static_cast<uint64_t>(image->width) * image->height > kMaxPixels ||
                     image->rgb.size() != static_cast<size_t>(image->width) * image->height * 3)) {
    __builtin_trap();
  }
  return 0;
}
