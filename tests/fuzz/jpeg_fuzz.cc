// JPEG headers and crop planning: the converter's header read (TurboJPEG) and the loader's
// region decode (libjpeg) with a crop box the input also chooses. Any bytes: pixels or an
// error, never a crash, never an allocation past the pixel limit.
#include <cstdint>
#include <cstring>
#include <vector>

#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_region.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kMaxPixels = 4'000'000;  // small, so a bomb is refused fast
  static auto* decoder = new ddpio::loader::JpegDecoder(
      std::move(ddpio::loader::JpegDecoder::Create(kMaxPixels)).value());
  static auto* region = new ddpio::loader::RegionDecoder(kMaxPixels);
  static auto* pixels = new std::vector<uint8_t>();
  if (size < 4) return 0;
  // The first 4 bytes choose the crop (fractions of a 1024 x 1024 stored geometry) and options.
  const double x0 = data[0] * 4.0, y0 = data[1] * 4.0;
  const ddpio::loader::Box box{x0, y0, x0 + 1 + data[2] * 3.0, y0 + 1 + data[3] * 3.0};
  absl::Span<const uint8_t> jpeg(data + 4, size - 4);
  auto info = decoder->ReadInfo(jpeg);
  if (info.ok()) {
    if (static_cast<uint64_t>(info->width) * info->height > kMaxPixels) __builtin_trap();
    (void)decoder->Decode(jpeg, *info, pixels);
  }
  ddpio::loader::DecodedRegion out;
  (void)region->Decode(jpeg, box, 32, 32, /*allow_scaling=*/(data[0] & 1) != 0,
                       /*full=*/(data[1] & 1) != 0,
                       /*fast_idct=*/(data[2] & 1) != 0, pixels, &out);
  return 0;
}
