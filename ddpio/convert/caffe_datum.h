// Caffe's `Datum` protobuf message, as DALI and Caffe store images in an LMDB, parsed by hand.
//
//   message Datum {
//     optional int32 channels = 1;
//     optional int32 height = 2;
//     optional int32 width = 3;
//     optional bytes data = 4;  // raw: uint8 planes in CHW order, BGR
//     optional int32 label = 5;
//     repeated float float_data = 6;
//     optional bool encoded = 7 [default = false];  // data holds an encoded image file
//   }
// Pure functions, no IO, thread-safe.
#ifndef DDPIO_CONVERT_CAFFE_DATUM_H_
#define DDPIO_CONVERT_CAFFE_DATUM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ddpio::convert {

struct CaffeDatum {
  int32_t channels = 0;
  int32_t height = 0;
  int32_t width = 0;
  absl::Span<const uint8_t> data;  // points into the parsed bytes
  int32_t label = 0;
  bool encoded = false;
  uint64_t float_data_count = 0;  // float_data values present (not supported for import)
};

// Reads the Datum in `bytes` into `*out` (reset first; `out->data` then points into `bytes`,
// which must outlive it). Follows protobuf's rules: the last value of a repeated field wins,
// unknown fields are skipped, int32 values are the low 32 bits of their varint. DataLoss, naming
// the field and the byte offset, when `bytes` are not a well-formed message: a truncated or
// overlong (> 10 bytes) varint, a field or length running past the end (a negative length is a
// huge one), a wrong wire type for a known field, a group, field number 0, or packed float_data
// whose length is not a multiple of 4. `*out` is unspecified after an error. Values are not
// checked here (CaffeDatumToRgb does).
absl::Status ParseCaffeDatum(absl::Span<const uint8_t> bytes, CaffeDatum* out);

// A raw (not encoded) Datum's pixels as RGB HWC (`*rgb` resized to height * width * 3):
// channels 3 are BGR planes, channels 1 a gray plane replicated. DataLoss when the datum is
// encoded, holds float_data instead of bytes, has other channel counts, non-positive sizes, more
// than `max_pixels` pixels, or data of the wrong size (saying which sizes) — all checked before
// `*rgb` is touched, so a forged header allocates nothing and `*rgb` is unchanged on error.
absl::Status CaffeDatumToRgb(const CaffeDatum& datum, uint64_t max_pixels,
                             std::vector<uint8_t>* rgb);

// Serialises a Datum as Caffe's protobuf code does: fields in number order, the geometry only
// when non-zero (Caffe leaves it unset for encoded Datums), data and label always, encoded only
// when true. (Caffe's own convert_imageset also writes `encoded: false` explicitly for raw
// Datums; this leaves it out, as protobuf does for an unset field — both parse the same.)
// For tests and fixtures.
std::string EncodeCaffeDatum(int32_t channels, int32_t height, int32_t width, std::string_view data,
                             int32_t label, bool encoded);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_CAFFE_DATUM_H_
