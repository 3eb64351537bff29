// The restart-marker transcode `convert` runs on every source JPEG (AddRestartMarkers), and its
// inverse (RemoveRestartMarkers, which `bench loader` runs on stored records): any bytes give a
// JPEG or an error — never a crash, a leak or an allocation past the pixel limit checked first,
// as convert checks it. A successful transcode must transcode back whenever the source itself
// can be written without markers (removing them can fail where adding them did not: a DC
// difference across a segment boundary may exceed what baseline Huffman codes can hold).
#include <cstdint>
#include <vector>

#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_restart.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kMaxPixels = 4'000'000;  // small, so a bomb is refused fast
  static auto* decoder = new ddpio::loader::JpegDecoder(
      std::move(ddpio::loader::JpegDecoder::Create(kMaxPixels)).value());
  if (size < 1) return 0;
  const int interval = 1 + data[0] % 8;  // the first byte chooses the interval
  const absl::Span<const uint8_t> jpeg(data + 1, size - 1);
  if (!decoder->ReadInfo(jpeg).ok())
    return 0;  // convert refuses these (and bombs) before transcoding
  auto marked = ddpio::loader::AddRestartMarkers(jpeg, interval);
  if (!marked.ok()) return 0;
  (void)ddpio::loader::ReadRestartLayout(*marked);
  // The same coefficients written without restarts, from the source and from our own output:
  // where the first succeeds, so must the second.
  if (ddpio::loader::RemoveRestartMarkers(jpeg).ok() &&
      !ddpio::loader::RemoveRestartMarkers(*marked).ok()) {
    __builtin_trap();
  }
  return 0;
}
