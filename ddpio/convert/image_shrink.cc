#include "ddpio/convert/image_shrink.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::convert {

std::pair<int, int> ShrunkSize(int width, int height, int max_side) {
  const int longer = std::max(width, height);
  if (max_side <= 0 || longer <= max_side) return {width, height};
  const double f = static_cast<double>(max_side) / longer;
  const auto scale = [&](int side) {
    return side == longer ? max_side : std::max(1, static_cast<int>(std::lround(side * f)));
  };
  return {scale(width), scale(height)};
}

absl::StatusOr<std::unique_ptr<Shrinker>> Shrinker::Create(const ShrinkOptions& options) {
  tjhandle h = tjInitCompress();
  if (h == nullptr)
    return absl::InternalError(absl::StrCat("tjInitCompress: ", tjGetErrorStr2(nullptr)));
  return std::unique_ptr<Shrinker>(new Shrinker(options, h));
}

Shrinker::Shrinker(const ShrinkOptions& options, void* compressor)
    : options_(options), compressor_(compressor) {}

Shrinker::~Shrinker() { tjDestroy(compressor_); }

absl::StatusOr<bool> Shrinker::Apply(storage::Record* r) {
  const int w = static_cast<int>(r->width), h = static_cast<int>(r->height);
  const auto [sw, sh] = ShrunkSize(w, h, options_.max_side);
  if (sw == w && sh == h) return false;
  DDPIO_RETURN_IF_ERROR(decoder_.DecodeWhole(r->view(), &full_));
  small_.resize(static_cast<size_t>(sw) * sh * 3);
  resampler_.Resize(full_.data(), w, h, w * 3, 3,
                    loader::Box{0, 0, static_cast<double>(w), static_cast<double>(h)},
                    small_.data(), sw, sh, sw * 3);
  if (r->type == storage::ContentType::kJpeg) {
    unsigned char* out = nullptr;
    unsigned long size = 0;
    if (tjCompress2(compressor_, small_.data(), sw, 0, sh, TJPF_RGB, &out, &size, TJSAMP_420,
                    options_.quality, TJFLAG_ACCURATEDCT) != 0) {
      return absl::InternalError(absl::StrCat("JPEG encode: ", tjGetErrorStr2(compressor_)));
    }
    r->payload.assign(out, out + size);
    tjFree(out);
  } else {
    r->payload = small_;
  }
  r->channels = 3;
  if (r->original_width ==
      0) {  // else shrunk before (a dataset converted again): keep the first size
    r->original_width = static_cast<uint32_t>(w);
    r->original_height = static_cast<uint32_t>(h);
  }
  r->width = static_cast<uint32_t>(sw);
  r->height = static_cast<uint32_t>(sh);
  return true;
}

}  // namespace ddpio::convert
