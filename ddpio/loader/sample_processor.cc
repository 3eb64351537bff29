#include "ddpio/loader/sample_processor.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::loader {

namespace {
constexpr EnumName<DecodeMode> kDecodeModes[] = {{DecodeMode::kFast, "fast"},
                                                 {DecodeMode::kExact, "exact"}};
}  // namespace

std::string DecodeModeName(DecodeMode mode) { return NameOf(kDecodeModes, mode); }
absl::StatusOr<DecodeMode> ParseDecodeMode(std::string_view name) {
  return ParseName(kDecodeModes, name, "decode mode");
}

namespace {

absl::Status CheckGeometry(const storage::RecordView& record) {
  if (record.width == 0 || record.height == 0) {
    return absl::DataLossError(
        absl::StrCat("record has an empty image (", record.width, "x", record.height, ")"));
  }
  if (record.type == storage::ContentType::kRawUint8 &&
      (record.channels != 3 ||
       record.payload.size() != static_cast<size_t>(record.width) * record.height * 3)) {
    return absl::DataLossError(absl::StrCat("raw record of ", record.payload.size(), " bytes and ",
                                            record.channels, " channels is not ", record.width, "x",
                                            record.height, "x3"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SampleProcessor::DecodeJpeg(const storage::RecordView& record, const Box& box,
                                         int out_w, int out_h, DecodeMode mode, bool full,
                                         DecodedRegion* region, const RestartLayout* layout) {
  const ScanSegments segments{
      layout != nullptr ? absl::MakeConstSpan(layout->offsets) : absl::Span<const uint32_t>(),
      layout != nullptr ? layout->interval : 0};
  DDPIO_RETURN_IF_ERROR(
      decoder_.Decode(record.payload, box, out_w, out_h, mode == DecodeMode::kFast, full,
                      /*fast_idct=*/mode == DecodeMode::kFast && fast_idct_, &pixels_, region,
                      /*columns=*/nullptr, layout != nullptr ? &segments : nullptr));
  if (static_cast<uint32_t>(region->image_width) != record.width ||
      static_cast<uint32_t>(region->image_height) != record.height) {
    return absl::DataLossError(absl::StrCat("stored geometry ", record.width, "x", record.height,
                                            " differs from the JPEG's ", region->image_width, "x",
                                            region->image_height));
  }
  return absl::OkStatus();
}

absl::Status SampleProcessor::ProcessSegments(const storage::RecordView& record,
                                              const RestartLayout& l, const SampleGeometry& g,
                                              int ow, int oh, DecodeMode mode, uint8_t* out,
                                              bool* used) {
  *used = false;
  if (static_cast<uint32_t>(l.width) != record.width ||
      static_cast<uint32_t>(l.height) != record.height) {
    return absl::DataLossError(absl::StrCat("stored geometry ", record.width, "x", record.height,
                                            " differs from the JPEG's ", l.width, "x", l.height));
  }
  const Box& b = g.box;
  const SegmentBand band = BandFor(l, b.x0, b.y0, b.x1, b.y1, std::max(ow, oh),
                                   /*exact_edges=*/mode == DecodeMode::kExact);
  if (band.whole) return absl::OkStatus();
  const int seg_w = l.interval * l.mcu_width;
  const int row0 = band.row0, row1 = band.row1, col0 = band.col0, col1 = band.col1;
  DDPIO_RETURN_IF_ERROR(
      BuildSubJpeg(record.payload, l, row0, row1, col0, col1, &sub_, &sub_offsets_));
  const ScanSegments segments{sub_offsets_, l.interval};
  const int ox = col0 * seg_w, oy = row0 * l.mcu_height;
  const int sw = std::min(l.width, col1 * seg_w) - ox,
            sh = std::min(l.height, row1 * l.mcu_height) - oy;
  const Box local{b.x0 - ox, b.y0 - oy, b.x1 - ox, b.y1 - oy};
  DecodedRegion region;
  // Exact: every row of the band, but only the columns the filter reads (with their margin), so
  // the segments' outer columns are entropy-decoded but not turned into pixels.
  const ColumnWindow columns{band.x0 - ox, band.x1 - ox};
  DDPIO_RETURN_IF_ERROR(
      decoder_.Decode(sub_, local, ow, oh, mode == DecodeMode::kFast,
                      /*full=*/mode == DecodeMode::kExact,
                      /*fast_idct=*/mode == DecodeMode::kFast && fast_idct_, &pixels_, &region,
                      mode == DecodeMode::kExact ? &columns : nullptr, &segments));
  if (region.image_width != sw || region.image_height != sh) {
    return absl::DataLossError(absl::StrCat("segment band decoded to ", region.image_width, "x",
                                            region.image_height, ", expected ", sw, "x", sh));
  }
  last_scale_denom_ = region.scale_denom;
  const auto resample_start = std::chrono::steady_clock::now();
  if (mode == DecodeMode::kExact) {
    // The full image's weights over the band: bit-identical to resampling the full decode.
    if (!resampler_.ResizeWindow(pixels_.data(), region.width, sh, region.width * 3, 3,
                                 ox + region.x0, oy, l.width, l.height, b, out, ow, oh, ow * 3,
                                 g.flip)) {
      return absl::OkStatus();  // cannot happen with the reach above; the full path is the answer
    }
  } else {
    resampler_.Resize(pixels_.data(), region.width, region.height, region.width * 3, 3, region.box,
                      out, ow, oh, ow * 3, g.flip);
  }
  resample_ns_ = static_cast<uint64_t>((std::chrono::steady_clock::now() - resample_start).count());
  *used = true;
  return absl::OkStatus();
}

absl::Status SampleProcessor::DecodeWhole(const storage::RecordView& record,
                                          std::vector<uint8_t>* rgb) {
  DDPIO_RETURN_IF_ERROR(CheckGeometry(record));
  if (record.type == storage::ContentType::kRawUint8) {
    rgb->assign(record.payload.begin(), record.payload.end());
    return absl::OkStatus();
  }
  const Box all{0, 0, static_cast<double>(record.width), static_cast<double>(record.height)};
  DecodedRegion region;
  const int side = static_cast<int>(std::max(record.width, record.height));
  // Through the entropy decoder the loader uses: with the restart layout when there is one.
  const absl::StatusOr<RestartLayout> layout =
      RecordRestartLayout(record.payload, record.segment_offsets);
  if (!layout.ok() && !record.segment_offsets.empty()) return layout.status();
  DDPIO_RETURN_IF_ERROR(DecodeJpeg(record, all, side, side, DecodeMode::kExact, /*full=*/true,
                                   &region, layout.ok() ? &*layout : nullptr));
  rgb->assign(pixels_.begin(),
              pixels_.begin() + static_cast<size_t>(region.width) * region.height * 3);
  return absl::OkStatus();
}

absl::Status SampleProcessor::Process(const storage::RecordView& record, uint64_t index,
                                      uint64_t epoch, uint64_t seed, const AugmentOptions& augment,
                                      DecodeMode mode, uint8_t* out) {
  using Clock = std::chrono::steady_clock;
  DDPIO_RETURN_IF_ERROR(CheckGeometry(record));
  const auto t0 = Clock::now();
  const SampleGeometry g = PlanSample(static_cast<int>(record.width),
                                      static_cast<int>(record.height), augment, seed, epoch, index);
  const int ow = augment.out_width(), oh = augment.out_height();
  if (record.type == storage::ContentType::kRawUint8) {
    resampler_.Resize(record.payload.data(), static_cast<int>(record.width),
                      static_cast<int>(record.height), static_cast<int>(record.width) * 3, 3, g.box,
                      out, ow, oh, ow * 3, g.flip);
    nanos_.augment += static_cast<uint64_t>((Clock::now() - t0).count());
    return absl::OkStatus();
  }
  last_used_segments_ = false;
  absl::StatusOr<RestartLayout> layout = absl::FailedPreconditionError("not read");
  if (segment_decode_) {
    layout = RecordRestartLayout(record.payload, record.segment_offsets);
    if (!layout.ok() && !record.segment_offsets.empty()) return layout.status();
    if (layout.ok()) {
      bool used = false;
      absl::Status st = ProcessSegments(record, *layout, g, ow, oh, mode, out, &used);
      if (used || !st.ok()) {
        // The band's decode, then its resample (timed inside): the two stages as the whole
        // image's path counts them.
        const uint64_t resampled = used ? resample_ns_ : 0;
        nanos_.decode += static_cast<uint64_t>((Clock::now() - t0).count()) - resampled;
        nanos_.augment += resampled;
        last_used_segments_ = used;
        return st;
      }
    }
  }
  DecodedRegion region;
  absl::Status decoded =
      DecodeJpeg(record, g.box, ow, oh, mode,
                 /*full=*/mode == DecodeMode::kExact, &region, layout.ok() ? &*layout : nullptr);
  const auto t1 = Clock::now();
  nanos_.decode += static_cast<uint64_t>((t1 - t0).count());
  if (!decoded.ok()) return decoded;
  last_scale_denom_ = region.scale_denom;
  resampler_.Resize(pixels_.data(), region.width, region.height, region.width * 3, 3, region.box,
                    out, ow, oh, ow * 3, g.flip);
  nanos_.augment += static_cast<uint64_t>((Clock::now() - t1).count());
  return absl::OkStatus();
}

}  // namespace ddpio::loader
