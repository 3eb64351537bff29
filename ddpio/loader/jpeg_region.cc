#include "ddpio/loader/jpeg_region.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/loader/internal/jpeg_error.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_huffman.h"

namespace ddpio::loader {

void CmykToRgb(const uint8_t* cmyk, size_t count, uint8_t* rgb) {
  // Pillow reads every 4-channel JPEG as Adobe's inverted CMYK ("CMYK;I": c = 255 - stored)
  // and converts with r = nk - c * nk / 255, nk = 255 - k, rounding as its MULDIV255 does.
  // With the inversion folded in: r = K - (255 - C) * K / 255 on the stored values.
  const auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (size_t i = 0; i < count; ++i, cmyk += 4, rgb += 3) {
    const int k = cmyk[3];
    for (int ch = 0; ch < 3; ++ch) rgb[ch] = static_cast<uint8_t>(k - muldiv255(255 - cmyk[ch], k));
  }
}

struct RegionDecoder::State {
  jpeg_decompress_struct cinfo;
  internal::JpegError error;
  std::vector<JSAMPROW> rows;
  std::vector<uint8_t> cmyk;  // scratch for CMYK/YCCK images
  HuffmanScan huffman;
};

RegionDecoder::RegionDecoder(uint64_t max_pixels)
    : state_(std::make_unique<State>()),
      max_pixels_(max_pixels),
      own_huffman_(OwnHuffmanDefault()) {
  jpeg_decompress_struct& c = state_->cinfo;
  c.err = internal::UseJpegError(&state_->error);
  jpeg_create_decompress(&c);
}

RegionDecoder::~RegionDecoder() { jpeg_destroy_decompress(&state_->cinfo); }

void RegionDecoder::set_huffman_streams(int n) { state_->huffman.set_streams(n); }
int RegionDecoder::last_huffman_streams() const {
  return last_used_own_huffman_ ? state_->huffman.streams_used() : 0;
}

absl::Status RegionDecoder::Decode(absl::Span<const uint8_t> jpeg, const Box& box, int out_w,
                                   int out_h, bool allow_scaling, bool full, bool fast_idct,
                                   std::vector<uint8_t>* pixels, DecodedRegion* region,
                                   const ColumnWindow* columns, const ScanSegments* segments) {
  jpeg_decompress_struct& c = state_->cinfo;
  last_used_own_huffman_ = false;
  // Nothing with a destructor lives between setjmp and a possible longjmp.
  if (setjmp(state_->error.jump) != 0) {
    jpeg_abort_decompress(&c);
    return absl::DataLossError(absl::StrCat("corrupt JPEG: ", state_->error.message));
  }
  jpeg_mem_src(&c, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&c, TRUE);
  const bool cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
  const int image_w = static_cast<int>(c.image_width), image_h = static_cast<int>(c.image_height);
  if (absl::Status st = CheckImagePixels(image_w, image_h, max_pixels_); !st.ok()) {
    jpeg_abort_decompress(&c);
    return st;
  }
  // The box was planned from the record's stored geometry; a record whose geometry claims more
  // than its JPEG holds (CRC-valid, so written that way) would crop outside the image.
  constexpr double kSlack = 1e-3;
  if (!(box.x0 >= -kSlack && box.y0 >= -kSlack && box.x1 <= image_w + kSlack &&
        box.y1 <= image_h + kSlack && box.x0 < box.x1 && box.y0 < box.y1)) {
    jpeg_abort_decompress(&c);
    return absl::DataLossError(
        absl::StrCat("the crop (", box.x0, ",", box.y0, ")-(", box.x1, ",", box.y1,
                     ") planned from the record's stored geometry lies outside its ", image_w, "x",
                     image_h, " JPEG: the stored geometry is wrong"));
  }
  int d = 1;
  if (allow_scaling) {
    const double bw = box.x1 - box.x0, bh = box.y1 - box.y0;
    for (int cand : {8, 4, 2}) {
      if (bw / cand >= out_w && bh / cand >= out_h) {
        d = cand;
        break;
      }
    }
  }
  c.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // libjpeg turns YCCK into CMYK itself
  c.dct_method = fast_idct ? JDCT_IFAST : JDCT_ISLOW;
  // Always "fancy" chroma upsampling: turning it off selects libjpeg's merged upsampler, which
  // in libjpeg-turbo 2.1.5 crashes intermittently together with jpeg_crop_scanline /
  // jpeg_skip_scanlines (seen here: SIGSEGV in jcopy_sample_rows in 22 of 30 test repetitions).
  c.do_fancy_upsampling = TRUE;
  c.scale_num = 1;
  c.scale_denom = static_cast<unsigned>(d);
  jpeg_start_decompress(&c);
  if (segments != nullptr && own_huffman_) {
    last_used_own_huffman_ =
        state_->huffman.Install(&c, jpeg, segments->offsets, segments->interval);
  }
  const int sw = static_cast<int>(c.output_width), sh = static_cast<int>(c.output_height);
  const double sx = static_cast<double>(sw) / image_w, sy = static_cast<double>(sh) / image_h;
  Box b{box.x0 * sx, box.y0 * sy, box.x1 * sx, box.y1 * sy};
  int x0 = 0, y0 = 0, x1 = sw, y1 = sh;
  if (columns != nullptr && d == 1) {
    x0 = std::clamp(columns->begin, 0, sw - 1);
    x1 = std::clamp(columns->end, x0 + 1, sw);
  } else if (!full) {
    // Margin for the resampling filter: its support is max(1, downscale) output pixels wide.
    const double scale = std::max((b.x1 - b.x0) / out_w, (b.y1 - b.y0) / out_h);
    const int margin = static_cast<int>(std::ceil(std::max(1.0, scale))) + 1;
    x0 = std::max(0, static_cast<int>(std::floor(b.x0)) - margin);
    y0 = std::max(0, static_cast<int>(std::floor(b.y0)) - margin);
    x1 = std::min(sw, static_cast<int>(std::ceil(b.x1)) + margin);
    y1 = std::min(sh, static_cast<int>(std::ceil(b.y1)) + margin);
  }
  JDIMENSION xoff = static_cast<JDIMENSION>(x0), width = static_cast<JDIMENSION>(x1 - x0);
  if (x0 > 0 || x1 < sw) jpeg_crop_scanline(&c, &xoff, &width);  // aligns to iMCUs
  const int rw = static_cast<int>(width), rh = y1 - y0;
  const size_t stride = static_cast<size_t>(rw) * 3;
  if (pixels->size() < stride * rh) pixels->resize(stride * rh);
  // CMYK rows land in scratch memory (4 bytes a pixel) and are converted below.
  std::vector<uint8_t>& target = cmyk ? state_->cmyk : *pixels;
  const size_t target_stride = static_cast<size_t>(rw) * (cmyk ? 4 : 3);
  if (target.size() < target_stride * rh) target.resize(target_stride * rh);
  if (y0 > 0) jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(y0));
  state_->rows.resize(static_cast<size_t>(rh));
  for (int r = 0; r < rh; ++r) state_->rows[r] = target.data() + target_stride * r;
  int done = 0;
  while (done < rh) {
    done += static_cast<int>(
        jpeg_read_scanlines(&c, state_->rows.data() + done, static_cast<JDIMENSION>(rh - done)));
  }
  if (cmyk) CmykToRgb(state_->cmyk.data(), static_cast<size_t>(rw) * rh, pixels->data());
  if (full) {
    jpeg_finish_decompress(&c);  // reads to the end: trailing corruption is caught too
  } else {
    jpeg_abort_decompress(&c);  // rows below the crop are never decoded
  }
  region->width = rw;
  region->height = rh;
  region->scale_denom = d;
  region->x0 = static_cast<int>(xoff);
  region->y0 = y0;
  region->image_width = image_w;
  region->image_height = image_h;
  region->box = {b.x0 - static_cast<double>(xoff), b.y0 - y0, b.x1 - static_cast<double>(xoff),
                 b.y1 - y0};
  // Keep the box inside the decoded pixels (float error at the image edge).
  region->box.x1 = std::min<double>(region->box.x1, rw);
  region->box.y1 = std::min<double>(region->box.y1, rh);
  return absl::OkStatus();
}

}  // namespace ddpio::loader
