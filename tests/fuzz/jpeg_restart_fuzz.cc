// A stored JPEG's restart layout (the loader reads it from every record of a segmented dataset)
// and the sub-JPEGs cut from it: whatever the bytes, an error or a band that decodes or fails
// cleanly — never a read outside the input.
#include <cstdint>
#include <vector>

#include "ddpio/loader/jpeg_region.h"
#include "ddpio/loader/jpeg_restart.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Span<const uint8_t> jpeg(data, size);
  auto layout = ddpio::loader::ReadRestartLayout(jpeg);
  if (!layout.ok()) return 0;
  const auto& l = *layout;
  if (static_cast<uint64_t>(l.width) * l.height > (1u << 22)) return 0;
  std::vector<uint8_t> sub, pixels;
  ddpio::loader::RegionDecoder decoder(1u << 22);
  const int bands[][4] = {{0, l.mcu_rows, 0, l.segments_per_row},
                          {l.mcu_rows / 2, l.mcu_rows, l.segments_per_row / 2, l.segments_per_row}};
  for (const auto& b : bands) {
    if (!ddpio::loader::BuildSubJpeg(jpeg, l, b[0], b[1], b[2], b[3], &sub).ok()) continue;
    ddpio::loader::DecodedRegion region;
    const ddpio::loader::Box all{0, 0, 1, 1};
    (void)decoder.Decode(sub, all, 1, 1, false, true, false, &pixels, &region);
  }
  return 0;
}
