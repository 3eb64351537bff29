// JPEG inspection and decoding with libjpeg-turbo (TurboJPEG API).
//
// Used by the converter (geometry and validation), `ddpio inspect --verify --decode` and the
// loader. Decoding is strict: anything libjpeg-turbo warns about (truncated data, corrupt
// Huffman codes) is DataLoss, because a silently half-grey image is a silently wrong sample.
// A JpegDecoder owns one TurboJPEG handle: not thread-safe, keep one per thread.
#ifndef DDPIO_LOADER_JPEG_H_
#define DDPIO_LOADER_JPEG_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ddpio::loader {

struct JpegInfo {
  int width = 0;
  int height = 0;
  int channels = 0;     // 1 (grayscale), 3 (YCbCr/RGB) or 4 (CMYK/YCCK)
  int subsampling = 0;  // TurboJPEG TJSAMP_* value
  int colorspace = 0;   // TurboJPEG TJCS_* value
};

// The largest image, in pixels, a decoder agrees to decode unless told otherwise: 100 MP
// (a 10,000 x 10,000 photo). A JPEG header costs nothing to forge — 761 bytes can declare
// 65,500 x 65,500, which would cost 12.9 GB to decode — so every decoder checks the header's
// size against its limit before allocating anything.
inline constexpr uint64_t kDefaultMaxImagePixels = 100'000'000;

// DataLoss "the <format> declares WxH = N pixels, more than the limit of M" when width * height >
// max_pixels, naming the setting (status_macros.h WithSetting "max_pixels"). `format` names the
// file's format: "JPEG", "PNG", ...
absl::Status CheckImagePixels(int64_t width, int64_t height, uint64_t max_pixels,
                              absl::string_view format = "JPEG");

// True when `bytes` starts with the JPEG SOI marker followed by another marker (FF D8 FF).
bool LooksLikeJpeg(absl::Span<const uint8_t> bytes);

// Names what `bytes` looks like when it is not a JPEG ("PNG image", "empty file", ...).
const char* DescribeNonJpeg(absl::Span<const uint8_t> bytes);

class JpegDecoder {
 public:
  // Internal when TurboJPEG cannot allocate a handle. Images of more than `max_pixels` are
  // refused (DataLoss) by ReadInfo, before any pixel memory is allocated.
  static absl::StatusOr<JpegDecoder> Create(uint64_t max_pixels = kDefaultMaxImagePixels);
  JpegDecoder(JpegDecoder&&) noexcept = default;
  JpegDecoder& operator=(JpegDecoder&&) noexcept = default;

  // Reads the header only. DataLoss when `bytes` is not a JPEG, its header is corrupt or it
  // declares more than max_pixels.
  absl::StatusOr<JpegInfo> ReadInfo(absl::Span<const uint8_t> bytes);

  // Fully decodes into `out` (resized to height * width * channels, interleaved: gray, RGB or
  // CMYK by info.channels). DataLoss on any error or warning from libjpeg-turbo.
  absl::Status Decode(absl::Span<const uint8_t> bytes, const JpegInfo& info,
                      std::vector<uint8_t>* out);

 private:
  struct HandleCloser {
    void operator()(void* handle) const;
  };
  JpegDecoder(void* handle, uint64_t max_pixels) : handle_(handle), max_pixels_(max_pixels) {}
  // After an error TurboJPEG's handle can carry state into the next call (seen: a good file
  // read as 0x0 after a corrupt header), so every error path replaces the handle.
  absl::Status Fail(absl::Status error);
  std::unique_ptr<void, HandleCloser> handle_;
  uint64_t max_pixels_ = kDefaultMaxImagePixels;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_JPEG_H_
