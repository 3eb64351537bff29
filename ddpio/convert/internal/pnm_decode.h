// PPM, PGM and PBM images to the RGB Pillow's convert("RGB") gives, parsed here as Pillow's
// PpmImagePlugin does (GraphicsMagick scales raw samples of maxvals other than 255 and 65535 in
// its own way). Internal to the convert module; DecodeImage (image_decode.h) calls it.
#ifndef DDPIO_CONVERT_INTERNAL_PNM_DECODE_H_
#define DDPIO_CONVERT_INTERNAL_PNM_DECODE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/convert/image_decode.h"

namespace ddpio::convert::internal {

// `b` starts with "P1" to "P6" (SniffImageFormat said "PNM").
absl::StatusOr<DecodedImage> DecodePnm(absl::Span<const uint8_t> b, const ImageDecodeOptions& o);

}  // namespace ddpio::convert::internal

#endif  // DDPIO_CONVERT_INTERNAL_PNM_DECODE_H_
