// One sample from stored record to output pixels: plan the geometry (augment.h), decode what is
// needed (jpeg_region.h), resample into the output (resize.h), flip.
//
//   kFast   decode only the crop's region, DCT-scaled when the crop is downscaled 2x or more;
//   kExact  decode the full image at full size, then crop and resize (torchvision's order).
// A JPEG with restart markers tiling its rows (jpeg_restart.h; `convert` writes them) is decoded
// in both modes from a sub-JPEG of just the segments the crop needs, plus one MCU and the
// resampling filter's reach on every side: the entropy decoding of the rest is skipped, and exact
// mode stays bit-identical to the full decode (the band's edge pixels, which chroma upsampling
// makes differ, lie outside every filter window). Such JPEGs are entropy-decoded by ddpio's own
// Huffman decoder (jpeg_huffman.h: libjpeg's coefficients, two segments at a time), the rest of
// the decode is libjpeg's.
// Both produce size x size x 3 uint8 (HWC). A SampleProcessor owns a decoder, a resampler and
// scratch buffers that grow to the largest image seen and are then reused: no allocation per
// sample once warm. Not thread-safe: one per worker thread.
#ifndef DDPIO_LOADER_SAMPLE_PROCESSOR_H_
#define DDPIO_LOADER_SAMPLE_PROCESSOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddpio/loader/augment.h"
#include "ddpio/loader/jpeg_region.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/loader/resize.h"
#include "ddpio/storage/record.h"

namespace ddpio::loader {

enum class DecodeMode { kFast, kExact };
std::string DecodeModeName(DecodeMode mode);
absl::StatusOr<DecodeMode> ParseDecodeMode(std::string_view name);

// Nanoseconds spent per stage, accumulated.
struct StageNanos {
  uint64_t decode = 0;
  uint64_t augment = 0;  // geometry + resample + flip
};

class SampleProcessor {
 public:
  // Writes the sample's size x size x 3 pixels to `out` (rows of size * 3 bytes). DataLoss for
  // a corrupt or unsupported image (the caller adds index and key).
  absl::Status Process(const storage::RecordView& record, uint64_t index, uint64_t epoch,
                       uint64_t seed, const AugmentOptions& augment, DecodeMode mode, uint8_t* out);

  // Decodes the whole image of `record` at full size into `rgb` (height * width * 3), through the
  // same decoder and checks Process uses: a record DecodeWhole accepts is one the loader loads
  // (what `ddpio inspect --verify --decode` runs). DataLoss as Process.
  absl::Status DecodeWhole(const storage::RecordView& record, std::vector<uint8_t>* rgb);

  const StageNanos& nanos() const { return nanos_; }
  // Fast mode only: libjpeg's fast integer IDCT (default on).
  void set_fast_idct(bool on) { fast_idct_ = on; }
  // The DCT scale used by the last Process (1, 2, 4 or 8).
  int last_scale_denom() const { return last_scale_denom_; }
  // Decode restart-segmented JPEGs from the crop's segments only (default on); off: always the
  // whole entropy stream (for comparisons).
  void set_segment_decode(bool on) { segment_decode_ = on; }
  // Whether the last Process decoded from a sub-JPEG of segments.
  bool last_used_segments() const { return last_used_segments_; }
  // Entropy-decode restart-marked JPEGs with ddpio's Huffman decoder (default
  // OwnHuffmanDefault(), normally on); off: libjpeg's (for comparisons).
  void set_own_huffman(bool on) { decoder_.set_own_huffman(on); }
  // Whether the last decode went through ddpio's Huffman decoder.
  bool last_used_own_huffman() const { return decoder_.last_used_own_huffman(); }

 private:
  // Decodes `record`'s JPEG (whole when `full`) and checks the JPEG's size against the record's.
  // `layout`: the record's restart layout, when it has one.
  absl::Status DecodeJpeg(const storage::RecordView& record, const Box& box, int out_w, int out_h,
                          DecodeMode mode, bool full, DecodedRegion* region,
                          const RestartLayout* layout = nullptr);

  // The segment path of Process for a JPEG laid out as `layout`; *used false (nothing written)
  // when the crop needs the whole image anyway.
  absl::Status ProcessSegments(const storage::RecordView& record, const RestartLayout& layout,
                               const SampleGeometry& g, int out_w, int out_h, DecodeMode mode,
                               uint8_t* out, bool* used);

  RegionDecoder decoder_;
  std::vector<uint8_t> sub_;           // the last sub-JPEG
  std::vector<uint32_t> sub_offsets_;  // and its segments
  Resampler resampler_;
  std::vector<uint8_t> pixels_;
  StageNanos nanos_;
  uint64_t resample_ns_ = 0;  // the last ProcessSegments's resample
  int last_scale_denom_ = 1;
  bool fast_idct_ = true;
  bool segment_decode_ = true;
  bool last_used_segments_ = false;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_SAMPLE_PROCESSOR_H_
