// A Caffe Datum (protobuf bytes from an LMDB being imported by `convert --from caffe-lmdb`).
// Besides "never crashes": a raw Datum converts to exactly height * width * 3 bytes or leaves
// the output alone, and whatever parsed re-encodes to bytes that parse to the same fields.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddpio/convert/caffe_datum.h"

namespace {

using ddpio::convert::CaffeDatum;

// Small, so that a forged geometry is refused rather than allocated.
constexpr uint64_t kMaxPixels = 1 << 16;

absl::Span<const uint8_t> Bytes(const std::string& s) {
  return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string_view View(absl::Span<const uint8_t> s) {
  return std::string_view(reinterpret_cast<const char*>(s.data()), s.size());
}

void CheckConversion(const CaffeDatum& d) {
  std::vector<uint8_t> rgb;
  if (ddpio::convert::CaffeDatumToRgb(d, kMaxPixels, &rgb).ok()) {
    if (rgb.size() != static_cast<uint64_t>(d.width) * static_cast<uint64_t>(d.height) * 3) {
      __builtin_trap();
    }
  } else if (!rgb.empty()) {
    __builtin_trap();  // refused after resizing the output
  }
}

void CheckRoundTrip(const CaffeDatum& d) {
  const std::string again = ddpio::convert::EncodeCaffeDatum(d.channels, d.height, d.width,
                                                             View(d.data), d.label, d.encoded);
  CaffeDatum e;
  if (!ddpio::convert::ParseCaffeDatum(Bytes(again), &e).ok() || e.channels != d.channels ||
      e.height != d.height || e.width != d.width || View(e.data) != View(d.data) ||
      e.label != d.label || e.encoded != d.encoded || e.float_data_count != 0) {
    __builtin_trap();
  }
  // Encoding is a function of the fields alone.
  if (ddpio::convert::EncodeCaffeDatum(e.channels, e.height, e.width, View(e.data), e.label,
                                       e.encoded) != again) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CaffeDatum d;
  if (!ddpio::convert::ParseCaffeDatum(absl::MakeConstSpan(data, size), &d).ok()) return 0;
  if (!d.encoded) CheckConversion(d);
  CheckRoundTrip(d);
  return 0;
}
