#include "ddpio/loader/jpeg_restart.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"
#include "ddpio/loader/internal/jpeg_error.h"

namespace ddpio::loader {
namespace {

absl::Status Malformed(const std::string& why) {
  return absl::DataLossError(absl::StrCat("malformed JPEG: ", why));
}
absl::Status NotSegmented(const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat("not segment-decodable: ", why));
}

// Walks the markers before the scan: fills the geometry, the interval and header_bytes.
absl::Status ReadHeader(absl::Span<const uint8_t> b, RestartLayout* l) {
  if (b.size() < 4 || b[0] != 0xFF || b[1] != 0xD8) return Malformed("no SOI marker");
  size_t pos = 2;
  int components = 0, hmax = 1, vmax = 1;
  bool sof = false;
  for (;;) {
    while (pos + 1 < b.size() && b[pos] == 0xFF && b[pos + 1] == 0xFF) ++pos;  // fill bytes
    if (pos + 4 > b.size()) return Malformed("cut short before the scan");
    if (b[pos] != 0xFF) return Malformed(absl::StrCat("no marker at byte ", pos));
    const uint8_t marker = b[pos + 1];
    if (marker == 0xD8 || marker == 0xD9 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
      return Malformed(absl::StrCat("marker FF", absl::Hex(marker), " before the scan"));
    }
    const size_t len = DecodeBigEndian16(&b[pos + 2]);
    if (len < 2 || pos + 2 + len > b.size())
      return Malformed(absl::StrCat("segment at byte ", pos, " runs past the end"));
    const uint8_t* s = b.data() + pos + 4;  // len - 2 bytes of payload (may be none)
    if (marker == 0xC0 || marker == 0xC1) {
      if (len < 8) return Malformed("short SOF");
      l->sof_offset = static_cast<uint32_t>(pos);
      l->height = static_cast<int>(DecodeBigEndian16(s + 1));
      l->width = static_cast<int>(DecodeBigEndian16(s + 3));
      components = s[5];
      if (components < 1 || components > 4 || len < 8 + 3u * components)
        return Malformed("SOF components");
      for (int c = 0; c < components; ++c) {
        hmax = std::max(hmax, s[6 + 3 * c + 1] >> 4);
        vmax = std::max(vmax, s[6 + 3 * c + 1] & 15);
      }
      sof = true;
    } else if ((marker >= 0xC2 && marker <= 0xCF) && marker != 0xC4 && marker != 0xC8 &&
               marker != 0xCC) {
      return NotSegmented(marker == 0xC2 ? "progressive"
                                         : absl::StrCat("coding process FF", absl::Hex(marker)));
    } else if (marker == 0xDD) {
      if (len != 4) return Malformed("DRI length");
      l->interval = static_cast<int>(DecodeBigEndian16(s));
    } else if (marker == 0xDA) {
      if (!sof) return Malformed("scan before SOF");
      if (len < 3) return Malformed("short SOS");
      if (s[0] != components) return NotSegmented("the first scan does not hold every component");
      l->header_bytes = static_cast<uint32_t>(pos + 2 + len);
      break;
    }
    pos += 2 + len;
  }
  if (l->width <= 0 || l->height <= 0) return NotSegmented("the image size is not in SOF");
  if (l->interval <= 0) return NotSegmented("no restart markers");
  l->mcu_width = components == 1 ? 8 : 8 * hmax;
  l->mcu_height = components == 1 ? 8 : 8 * vmax;
  l->mcus_per_row = (l->width + l->mcu_width - 1) / l->mcu_width;
  l->mcu_rows = (l->height + l->mcu_height - 1) / l->mcu_height;
  if (l->mcus_per_row % l->interval != 0) {
    return NotSegmented(absl::StrCat("restart interval ", l->interval, " does not divide the ",
                                     l->mcus_per_row, " MCUs of a row"));
  }
  l->segments_per_row = l->mcus_per_row / l->interval;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RestartLayout> ReadRestartLayout(absl::Span<const uint8_t> b) {
  RestartLayout l;
  if (absl::Status st = ReadHeader(b, &l); !st.ok()) return st;
  const size_t expected = static_cast<size_t>(l.mcu_rows) * l.segments_per_row;
  l.offsets.reserve(expected + 1);
  l.offsets.push_back(l.header_bytes);
  const uint8_t* p = b.data() + l.header_bytes;
  const uint8_t* end = b.data() + b.size();
  for (;;) {
    p = static_cast<const uint8_t*>(std::memchr(p, 0xFF, static_cast<size_t>(end - p)));
    if (p == nullptr || p + 1 >= end) return Malformed("the scan has no EOI (cut short?)");
    const uint8_t m = p[1];
    if (m == 0x00 || m == 0xFF) {  // stuffed byte or fill
      p += m == 0x00 ? 2 : 1;
    } else if (m >= 0xD0 && m <= 0xD7) {
      if (m != 0xD0 + (l.offsets.size() - 1) % 8)
        return Malformed("restart markers out of sequence");
      if (l.offsets.size() > expected) return NotSegmented("more segments than the image has");
      l.offsets.push_back(static_cast<uint32_t>(p + 2 - b.data()));
      p += 2;
    } else if (m == 0xD9) {
      l.offsets.push_back(static_cast<uint32_t>(p - b.data()));
      break;
    } else {
      return NotSegmented(
          absl::StrCat("marker FF", absl::Hex(m), " inside the scan (a second scan or DNL)"));
    }
  }
  if (l.offsets.size() != expected + 1) {
    return NotSegmented(absl::StrCat(l.offsets.size() - 1, " segments where ", l.mcu_rows,
                                     " rows of ", l.segments_per_row, " need ", expected));
  }
  return l;
}

absl::StatusOr<RestartLayout> RestartLayoutFromOffsets(absl::Span<const uint8_t> b,
                                                       absl::Span<const uint8_t> offsets) {
  RestartLayout l;
  if (absl::Status st = ReadHeader(b, &l); !st.ok()) return st;
  const size_t expected = static_cast<size_t>(l.mcu_rows) * l.segments_per_row + 1;
  if (offsets.size() != 4 * expected) {
    return absl::DataLossError(absl::StrCat("recorded segment offsets: ", offsets.size() / 4,
                                            " where the JPEG has ", expected - 1, " segments"));
  }
  l.offsets.resize(expected);
  for (size_t i = 0; i < expected; ++i) {
    l.offsets[i] = DecodeFixed32(offsets.data() + 4 * i);
  }
  if (l.offsets[0] != l.header_bytes)
    return absl::DataLossError("recorded segment offsets: first is not the scan");
  for (size_t i = 1; i < expected; ++i) {
    const uint32_t at = l.offsets[i];
    const bool last = i + 1 == expected;
    if (at <= l.offsets[i - 1] + (last ? 0 : 1) || at + (last ? 2 : 0) > b.size()) {
      return absl::DataLossError(
          absl::StrCat("recorded segment offset ", i, " out of order or past the end"));
    }
    const bool marker = last ? (b[at] == 0xFF && b[at + 1] == 0xD9)
                             : (b[at - 2] == 0xFF && b[at - 1] == 0xD0 + (i - 1) % 8);
    if (!marker)
      return absl::DataLossError(
          absl::StrCat("recorded segment offset ", i, " is not at a restart marker"));
  }
  return l;
}

absl::StatusOr<RestartLayout> RecordRestartLayout(absl::Span<const uint8_t> jpeg,
                                                  absl::Span<const uint8_t> recorded_offsets) {
  return recorded_offsets.empty() ? ReadRestartLayout(jpeg)
                                  : RestartLayoutFromOffsets(jpeg, recorded_offsets);
}

std::vector<uint8_t> EncodeSegmentOffsets(const RestartLayout& l) {
  std::vector<uint8_t> out(4 * l.offsets.size());
  for (size_t i = 0; i < l.offsets.size(); ++i) EncodeFixed32(&out[4 * i], l.offsets[i]);
  return out;
}

int RestartIntervalFor(int mcus_per_row, int target) {
  for (int d = std::max(1, std::min(target, mcus_per_row)); d > 1; --d) {
    if (mcus_per_row % d == 0) return d;
  }
  return 1;
}

namespace {

// The coefficient transcode behind AddRestartMarkers and RemoveRestartMarkers: a restart marker
// every RestartIntervalFor(MCUs per row, target_interval) MCUs, none for target_interval 0.
absl::StatusOr<std::vector<uint8_t>> Transcode(absl::Span<const uint8_t> jpeg,
                                               int target_interval) {
  jpeg_decompress_struct src;
  jpeg_compress_struct dst;
  internal::JpegError err;
  src.err = internal::UseJpegError(&err);
  dst.err = &err.pub;
  jpeg_create_decompress(&src);
  jpeg_create_compress(&dst);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  // Nothing with a destructor lives between setjmp and a possible longjmp.
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_compress(&dst);
    jpeg_destroy_decompress(&src);
    std::free(out);
    return absl::DataLossError(absl::StrCat("corrupt JPEG: ", err.message));
  }
  jpeg_mem_src(&src, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&src, TRUE);
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(&src);
  jpeg_mem_dest(&dst, &out, &out_size);
  jpeg_copy_critical_parameters(&src, &dst);
  dst.optimize_coding = TRUE;  // lossless either way; optimal tables win back the markers' bytes
  const int mcu_w = src.num_components == 1 ? 8 : 8 * src.max_h_samp_factor;
  const int mcus_per_row = static_cast<int>((src.image_width + mcu_w - 1) / mcu_w);
  dst.restart_interval =
      target_interval == 0
          ? 0u
          : static_cast<unsigned>(RestartIntervalFor(mcus_per_row, target_interval));
  jpeg_write_coefficients(&dst, coefficients);
  jpeg_finish_compress(&dst);
  jpeg_finish_decompress(&src);
  std::vector<uint8_t> result(out, out + out_size);
  jpeg_destroy_compress(&dst);
  jpeg_destroy_decompress(&src);
  std::free(out);
  return result;
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> AddRestartMarkers(absl::Span<const uint8_t> jpeg,
                                                       int target_interval) {
  return Transcode(jpeg, std::max(1, target_interval));
}

absl::StatusOr<std::vector<uint8_t>> RemoveRestartMarkers(absl::Span<const uint8_t> jpeg) {
  return Transcode(jpeg, 0);
}

SegmentBand BandFor(const RestartLayout& l, double x0, double y0, double x1, double y1,
                    int out_size, bool exact_edges) {
  const double scale = std::max((x1 - x0) / out_size, (y1 - y0) / out_size);
  const int reach =
      static_cast<int>(std::ceil(std::max(1.0, scale))) + 2;  // the filter's support, and slack
  // Fancy (triangle) chroma upsampling gives a band's outermost luma column and row other pixels
  // than the full image's (the band replicates its edge where the image has a neighbour); a
  // quarter MCU (4 pixels for 4:2:0, 2 for 4:4:4) keeps those out of the filter's reach.
  const int mx = exact_edges ? l.mcu_width / 4 : 0, my = exact_edges ? l.mcu_height / 4 : 0;
  const int seg_w = l.interval * l.mcu_width;
  SegmentBand b;
  b.x0 = std::max(0, static_cast<int>(std::floor(x0)) - reach - mx);
  b.x1 = std::min(l.width, static_cast<int>(std::ceil(x1)) + reach + mx);
  b.col0 = b.x0 / seg_w;
  b.col1 = std::min(l.segments_per_row, (b.x1 + seg_w - 1) / seg_w);
  b.row0 = std::max(0, static_cast<int>(std::floor(y0)) - reach - my) / l.mcu_height;
  b.row1 = std::min(
      l.mcu_rows, (static_cast<int>(std::ceil(y1)) + reach + my + l.mcu_height - 1) / l.mcu_height);
  b.whole = b.col0 == 0 && b.col1 == l.segments_per_row && b.row0 == 0 && b.row1 == l.mcu_rows;
  return b;
}

absl::Status BuildSubJpeg(absl::Span<const uint8_t> jpeg, const RestartLayout& l, int row0,
                          int row1, int col0, int col1, std::vector<uint8_t>* out,
                          std::vector<uint32_t>* offsets) {
  if (!(0 <= row0 && row0 < row1 && row1 <= l.mcu_rows && 0 <= col0 && col0 < col1 &&
        col1 <= l.segments_per_row)) {
    return absl::InvalidArgumentError(
        absl::StrCat("band rows [", row0, ", ", row1, ") x segment columns [", col0, ", ", col1,
                     ") outside ", l.mcu_rows, " x ", l.segments_per_row));
  }
  if (l.offsets.size() != static_cast<size_t>(l.mcu_rows) * l.segments_per_row + 1 ||
      l.offsets.back() > jpeg.size()) {
    return absl::InvalidArgumentError("restart layout does not belong to this JPEG");
  }
  const int seg_w = l.interval * l.mcu_width;
  const int w = std::min(l.width, col1 * seg_w) - col0 * seg_w;
  const int h = std::min(l.height, row1 * l.mcu_height) - row0 * l.mcu_height;
  out->assign(jpeg.begin(), jpeg.begin() + l.header_bytes);
  uint8_t* sof = out->data() + l.sof_offset + 5;  // height, then width, big-endian
  sof[0] = static_cast<uint8_t>(h >> 8);
  sof[1] = static_cast<uint8_t>(h);
  sof[2] = static_cast<uint8_t>(w >> 8);
  sof[3] = static_cast<uint8_t>(w);
  const size_t last = l.offsets.size() - 2;
  if (offsets != nullptr) offsets->clear();
  int k = 0;
  for (int r = row0; r < row1; ++r) {
    for (int c = col0; c < col1; ++c, ++k) {
      const size_t s = static_cast<size_t>(r) * l.segments_per_row + c;
      if (k > 0) {
        out->push_back(0xFF);
        out->push_back(static_cast<uint8_t>(0xD0 + (k - 1) % 8));
      }
      if (offsets != nullptr) offsets->push_back(static_cast<uint32_t>(out->size()));
      const uint32_t end = s == last ? l.offsets[s + 1] : l.offsets[s + 1] - 2;
      out->insert(out->end(), jpeg.begin() + l.offsets[s], jpeg.begin() + end);
    }
  }
  if (offsets != nullptr) offsets->push_back(static_cast<uint32_t>(out->size()));
  out->push_back(0xFF);
  out->push_back(0xD9);
  return absl::OkStatus();
}

}  // namespace ddpio::loader
