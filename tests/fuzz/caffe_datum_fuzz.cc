// A Caffe Datum (protobuf bytes from an LMDB being imported by `convert --from caffe-lmdb`).
#include <cstdint>
#include <string_view>
#include <vector>

#include "tools/caffe_datum.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddpio::tools::CaffeDatum d;
  if (!ddpio::tools::ParseCaffeDatum(absl::MakeConstSpan(data, size), &d).ok()) return 0;
  std::vector<uint8_t> rgb;
  (void)ddpio::tools::CaffeDatumToRgb(d, 1 << 20, &rgb);
  // What parsed re-encodes (as Caffe would write it) and parses to the same fields.
  const std::string again = ddpio::tools::EncodeCaffeDatum(
      d.channels, d.height, d.width,
      std::string_view(reinterpret_cast<const char*>(d.data.data()), d.data.size()), d.label,
      d.encoded);
  ddpio::tools::CaffeDatum e;
  if (!ddpio::tools::ParseCaffeDatum(
           absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(again.data()), again.size()), &e)
           .ok() ||
      e.label != d.label || e.channels != d.channels || e.encoded != d.encoded ||
      e.data.size() != d.data.size()) {
    __builtin_trap();
  }
  return 0;
}
