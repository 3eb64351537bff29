// ddpio's Huffman decoder against libjpeg-turbo's on the same bytes (a differential target): for
// any restart-marked JPEG, both decode it to the same pixels or both refuse it. The one
// difference allowed: whole bytes left over at the end of a segment, which libjpeg refuses or not
// depending on how far its bit buffer had read ahead when the segment ended, while ddpio's
// decoder refuses them always (before a restart marker) or never (before EOI: no pixel's data);
// and, for a crop, damage below it, which libjpeg never reads and ddpio's decoder (16 segments
// ahead) may. Never a read outside the input, never a crash.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ddpio/loader/jpeg_region.h"
#include "ddpio/loader/jpeg_restart.h"

namespace {

// scale_to 0: the whole image at full size, read to the end; 1: the whole image at 1/8; 2: a crop
// of the middle, DCT-scaled, with skipped and cropped scanlines, stopped after its last row.
absl::Status DecodeWith(bool own, absl::Span<const uint8_t> jpeg,
                        const ddpio::loader::RestartLayout& l, int scale_to,
                        std::vector<uint8_t>* pixels, bool* used) {
  static ddpio::loader::RegionDecoder* decoders[2] = {new ddpio::loader::RegionDecoder(1u << 22),
                                                      new ddpio::loader::RegionDecoder(1u << 22)};
  ddpio::loader::RegionDecoder& d = *decoders[own ? 1 : 0];
  d.set_own_huffman(own);
  const ddpio::loader::ScanSegments segments{l.offsets, l.interval};
  ddpio::loader::DecodedRegion region;
  const ddpio::loader::Box all{0, 0, static_cast<double>(l.width), static_cast<double>(l.height)};
  const ddpio::loader::Box middle{l.width * 0.3, l.height * 0.4, l.width * 0.8, l.height * 0.7};
  absl::Status st =
      scale_to == 2 ? d.Decode(jpeg, middle, 2, 2, /*allow_scaling=*/true, /*full=*/false,
                               /*fast_idct=*/true, pixels, &region, nullptr, &segments)
                    : d.Decode(jpeg, all, scale_to == 0 ? l.width : 1, scale_to == 0 ? l.height : 1,
                               /*allow_scaling=*/scale_to != 0, /*full=*/true, /*fast_idct=*/false,
                               pixels, &region, nullptr, &segments);
  *used = d.last_used_own_huffman();
  if (st.ok()) pixels->resize(static_cast<size_t>(region.width) * region.height * 3);
  return st;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Span<const uint8_t> jpeg(data, size);
  auto layout = ddpio::loader::ReadRestartLayout(jpeg);
  if (!layout.ok()) return 0;
  if (static_cast<uint64_t>(layout->width) * layout->height > (1u << 20)) return 0;
  for (int scale_to : {0, 1, 2}) {
    std::vector<uint8_t> own, lib;
    bool used = false, lib_used = true;
    const absl::Status a = DecodeWith(true, jpeg, *layout, scale_to, &own, &used);
    const absl::Status b = DecodeWith(false, jpeg, *layout, scale_to, &lib, &lib_used);
    if (lib_used) std::abort();  // libjpeg's run must be libjpeg's
    if (!used) continue;         // a scan the own decoder does not take: libjpeg decoded both
    if (a.ok() && b.ok() && own != lib) std::abort();
    const auto extraneous = [](const absl::Status& s) {
      return std::strstr(std::string(s.message()).c_str(), "extraneous bytes") != nullptr;
    };
    // Refused what libjpeg accepts: allowed for a crop, which libjpeg stops short of while ddpio's
    // decoder has read up to 16 segments ahead.
    if (!a.ok() && b.ok() && !extraneous(a) && scale_to != 2) std::abort();
    if (a.ok() && !b.ok() && !extraneous(b)) std::abort();  // accepted what libjpeg refuses
  }
  return 0;
}
