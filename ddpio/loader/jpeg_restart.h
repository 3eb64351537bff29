// Restart markers: what lets the loader entropy-decode only the part of a JPEG a crop uses.
//
// After an RSTn marker the DC predictors reset and the entropy coder restarts byte-aligned, so
// each restart segment decodes on its own. `AddRestartMarkers` (at conversion) rewrites a JPEG
// losslessly — coefficients copied, nothing decoded or re-quantised — into a baseline JPEG with a
// restart marker every `interval` MCUs, the interval dividing the MCUs of a row so that segments
// tile each MCU row. `BuildSubJpeg` (in the loader) cuts the segments covering a band of MCU rows
// and columns out of such a JPEG and stitches them into a small valid JPEG (the band's size in
// SOF, the same tables, RSTn renumbered), which any decoder decodes alone: its pixels equal the
// full image's, except within one MCU of the band's edges (chroma upsampling reads neighbours).
// Pure functions over bytes, thread-safe.
#ifndef DDPIO_LOADER_JPEG_RESTART_H_
#define DDPIO_LOADER_JPEG_RESTART_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddpio::loader {

// Where the segments of a segment-decodable JPEG are.
struct RestartLayout {
  int width = 0, height = 0;          // the image's pixels
  int mcu_width = 0, mcu_height = 0;  // pixels per MCU (8 or 16)
  int mcus_per_row = 0, mcu_rows = 0;
  int interval = 0;           // MCUs per segment; divides mcus_per_row
  int segments_per_row = 0;   // mcus_per_row / interval
  uint32_t header_bytes = 0;  // SOI .. end of the SOS header: the tables every sub-JPEG copies
  uint32_t sof_offset = 0;    // of the SOF marker (its size fields are rewritten)
  // Byte offset of each segment's first entropy-coded byte, in raster order, and one more: the
  // offset just past the last segment (where EOI starts). Segment i spans [offsets[i], offsets[i+1]
  // - 2) — the 2 bytes before the next segment are its RSTn marker.
  std::vector<uint32_t> offsets;
};

// The layout of `jpeg` when it is segment-decodable: one baseline (or extended sequential)
// Huffman scan over every component, a restart interval dividing the MCUs of a row, and exactly
// mcu_rows * segments_per_row segments. FailedPrecondition saying why not otherwise (progressive,
// no restart markers, an interval that straddles rows, ...); DataLoss for a malformed JPEG.
absl::StatusOr<RestartLayout> ReadRestartLayout(absl::Span<const uint8_t> jpeg);

// The layout of `jpeg` from the segment offsets recorded at conversion (4 bytes little-endian
// each, as RecordView::segment_offsets): the header is parsed, the offsets checked against it and
// against the bytes at each (an RSTn marker before every segment but the first, EOI after the
// last), so the entropy data is not scanned. Errors as ReadRestartLayout, DataLoss for offsets
// that do not fit the JPEG.
absl::StatusOr<RestartLayout> RestartLayoutFromOffsets(absl::Span<const uint8_t> jpeg,
                                                       absl::Span<const uint8_t> offsets);

// The layout of a stored JPEG: from the segment offsets recorded at conversion when there are any
// (RestartLayoutFromOffsets), else scanned from the JPEG, one that came with restart markers of
// its own (ReadRestartLayout). Their errors.
absl::StatusOr<RestartLayout> RecordRestartLayout(absl::Span<const uint8_t> jpeg,
                                                  absl::Span<const uint8_t> recorded_offsets);

// `layout.offsets` as RecordView::segment_offsets stores them.
std::vector<uint8_t> EncodeSegmentOffsets(const RestartLayout& layout);

// The restart interval AddRestartMarkers uses for an image `mcus_per_row` MCUs wide: the largest
// divisor of mcus_per_row not above `target`.
int RestartIntervalFor(int mcus_per_row, int target);

// Rewrites `jpeg` (baseline or progressive) as a baseline JPEG with Huffman tables optimised for
// it and a restart marker every RestartIntervalFor(MCUs per row, target_interval) MCUs; the
// coefficients are copied, so a decoder gives exactly the original's pixels. Metadata markers
// (EXIF, ICC, comments) are not copied. DataLoss when `jpeg` does not decode.
absl::StatusOr<std::vector<uint8_t>> AddRestartMarkers(absl::Span<const uint8_t> jpeg,
                                                       int target_interval);

// The same transcode without restart markers: `jpeg` as an ordinary baseline JPEG (optimised
// tables, the same pixels). `bench loader` times its full-decode ceiling on these: libjpeg-turbo
// (2.1.5 here) decodes every MCU of a JPEG that has a restart interval on its slower Huffman path,
// so the ceiling must not be measured on the restart-marked bytes the loader reads.
absl::StatusOr<std::vector<uint8_t>> RemoveRestartMarkers(absl::Span<const uint8_t> jpeg);

// The band of segments a crop reads: `box` (image pixels) resampled to out_size x out_size, plus
// the resampling filter's reach (its support and 2 pixels of slack), snapped out to whole segments
// and MCU rows. With `exact_edges` a quarter MCU more on every side: fancy chroma upsampling makes
// the band's outermost pixel row and column differ from the full image's, and the filter must read
// only the full decode's pixels. Without it (fast mode) the band can be one segment column and one
// MCU row smaller at each edge, and the filter's outermost taps may read such edge pixels.
struct SegmentBand {
  int row0 = 0, row1 = 0, col0 = 0, col1 = 0;
  bool whole = false;  // the band is the whole image: nothing to gain
  // The image columns [x0, x1) the filter reads, with the margin above: inside the band's
  // segments, the part of them worth decoding to pixels.
  int x0 = 0, x1 = 0;
};
SegmentBand BandFor(const RestartLayout& layout, double x0, double y0, double x1, double y1,
                    int out_size, bool exact_edges);

// The JPEG made of the segments covering MCU rows [row0, row1) and segment columns [col0, col1)
// of `jpeg` (laid out as `layout`): pixels [col0 * interval * mcu_width, min(width, col1 * ...))
// x [row0 * mcu_height, min(height, row1 * mcu_height)) of the image. `offsets`, when given, gets
// the sub-JPEG's own segment offsets (as RestartLayout::offsets). InvalidArgument for an empty or
// out-of-range band.
absl::Status BuildSubJpeg(absl::Span<const uint8_t> jpeg, const RestartLayout& layout, int row0,
                          int row1, int col0, int col1, std::vector<uint8_t>* out,
                          std::vector<uint32_t>* offsets = nullptr);

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_JPEG_RESTART_H_
