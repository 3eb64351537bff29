// Dataset records as stored: DecodeRecord must return OK or an error for any bytes, and a view
// it returns must lie inside them.
#include <cstdint>

#include "ddpio/storage/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddpio::storage::RecordView view;
  for (bool verify : {true, false}) {
    if (!ddpio::storage::DecodeRecord(absl::Span<const uint8_t>(data, size), verify, &view).ok())
      continue;
    volatile uint8_t sink = 0;
    for (uint8_t b : view.payload) sink = sink ^ b;  // every byte of the view is readable
    for (char c : view.source_name) sink = sink ^ static_cast<uint8_t>(c);
  }
  return 0;
}
