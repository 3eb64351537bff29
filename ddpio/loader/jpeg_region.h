// Decoding only the part of a JPEG a crop needs, at the smallest size that still serves it.
//
// Uses libjpeg-turbo's libjpeg API: jpeg_crop_scanline (columns), jpeg_skip_scanlines (rows
// above the crop) and stopping after its last row, plus DCT-domain scaling by 1/2, 1/4 or 1/8
// when the crop will be downscaled by at least that much anyway. The decoded region includes a
// margin for the resampling filter, so resampling it matches resampling the full image except
// for the DCT scaling itself (measured in docs/PERFORMANCE.md). Output is always RGB (gray is
// expanded, CMYK/YCCK converted to RGB exactly as Pillow's convert("RGB") does). Strict like
// JpegDecoder: libjpeg warnings (corrupt data) are DataLoss. Not thread-safe: one per worker
// thread.
#ifndef DDPIO_LOADER_JPEG_REGION_H_
#define DDPIO_LOADER_JPEG_REGION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ddpio/loader/resize.h"

namespace ddpio::loader {

struct DecodedRegion {
  int width = 0, height = 0;              // decoded pixels (RGB rows of width * 3 bytes)
  int scale_denom = 1;                    // the image was decoded at 1 / scale_denom
  int image_width = 0, image_height = 0;  // the JPEG's own size
  Box box;                                // the requested box, in decoded-region pixel coordinates
  int x0 = 0, y0 = 0;                     // the decoded region's origin in the (scaled) image
};

// Columns [begin, end) of a full-size decode (Decode's `columns`).
struct ColumnWindow {
  int begin = 0, end = 0;
};

// The restart segments of the JPEG being decoded (RestartLayout::offsets and interval, for these
// very bytes): given them, Decode entropy-decodes the scan with ddpio's Huffman decoder
// (jpeg_huffman.h) instead of libjpeg's — the same coefficients, two segments at a time.
struct ScanSegments {
  absl::Span<const uint32_t> offsets;
  int interval = 0;
};

// Adobe-inverted CMYK (what libjpeg returns for a 4-channel JPEG) to RGB, bit-identical to
// Pillow's `Image.open(jpeg).convert("RGB")`: `count` pixels, 4 bytes in, 3 out.
void CmykToRgb(const uint8_t* cmyk, size_t count, uint8_t* rgb);

class RegionDecoder {
 public:
  // Images of more than `max_pixels` are refused (DataLoss) right after their header is read.
  explicit RegionDecoder(uint64_t max_pixels = 100'000'000);
  ~RegionDecoder();
  RegionDecoder(const RegionDecoder&) = delete;
  RegionDecoder& operator=(const RegionDecoder&) = delete;

  // Decodes the region of `jpeg` covering `box` (source pixels) plus a filter margin. With
  // `allow_scaling`, uses the largest 1/d (d in 2, 4, 8) that keeps the box at least out_w x
  // out_h pixels; without it, decodes at full size (the exact mode). `full` decodes the whole
  // image regardless of the box. `fast_idct` uses libjpeg's fast integer IDCT (JDCT_IFAST):
  // faster, slightly less accurate. Pixels go to `pixels` (grown as needed, never shrunk).
  // DataLoss when the box does not lie inside the JPEG (the record's stored geometry disagrees
  // with the image) or the image is larger than the limit. `columns` (with `full` and without
  // `allow_scaling`): every row, but only these columns, widened to whole iMCUs by
  // jpeg_crop_scanline — the IDCT, upsampling and colour conversion of the others are skipped;
  // the window's outermost column on either side may differ from the full decode's (chroma
  // upsampling replicates the window's edge), the rest are the full decode's pixels.
  // `segments`: see ScanSegments (libjpeg's own Huffman decoder without them, or when the scan
  // is not one ddpio's decodes).
  absl::Status Decode(absl::Span<const uint8_t> jpeg, const Box& box, int out_w, int out_h,
                      bool allow_scaling, bool full, bool fast_idct, std::vector<uint8_t>* pixels,
                      DecodedRegion* region, const ColumnWindow* columns = nullptr,
                      const ScanSegments* segments = nullptr);

  // Use ddpio's Huffman decoder where segments are given (default: OwnHuffmanDefault()).
  void set_own_huffman(bool on) { own_huffman_ = on; }
  // Segments ddpio's Huffman decoder decodes at once (HuffmanScan::set_streams).
  void set_huffman_streams(int n);
  // The most segments ddpio's Huffman decoder had in decoding at once in the last Decode.
  int last_huffman_streams() const;
  // Whether the last Decode's scan went through ddpio's Huffman decoder.
  bool last_used_own_huffman() const { return last_used_own_huffman_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  uint64_t max_pixels_;
  bool own_huffman_;
  bool last_used_own_huffman_ = false;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_JPEG_REGION_H_
