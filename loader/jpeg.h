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
#include "absl/types/span.h"

namespace ddpio::loader {

struct JpegInfo {
  int width = 0;
  int height = 0;
  int channels = 0;    // 1 (grayscale), 3 (YCbCr/RGB) or 4 (CMYK/YCCK)
  int subsampling = 0;  // TurboJPEG TJSAMP_* value
  int colorspace = 0;   // TurboJPEG TJCS_* value
};

// True when `bytes` starts with the JPEG SOI marker followed by another marker (FF D8 FF).
bool LooksLikeJpeg(absl::Span<const uint8_t> bytes);

// Names what `bytes` looks like when it is not a JPEG ("PNG image", "empty file", ...).
const char* DescribeNonJpeg(absl::Span<const uint8_t> bytes);

class JpegDecoder {
 public:
  // Internal when TurboJPEG cannot allocate a handle.
  static absl::StatusOr<JpegDecoder> Create();
  JpegDecoder(JpegDecoder&&) noexcept = default;
  JpegDecoder& operator=(JpegDecoder&&) noexcept = default;

  // Reads the header only. DataLoss when `bytes` is not a JPEG or its header is corrupt.
  absl::StatusOr<JpegInfo> ReadInfo(absl::Span<const uint8_t> bytes);

  // Fully decodes into `out` (resized to height * width * channels, interleaved: gray, RGB or
  // CMYK by info.channels). DataLoss on any error or warning from libjpeg-turbo.
  absl::Status Decode(absl::Span<const uint8_t> bytes, const JpegInfo& info,
                      std::vector<uint8_t>* out);

 private:
  struct HandleCloser {
    void operator()(void* handle) const;
  };
  explicit JpegDecoder(void* handle) : handle_(handle) {}
  // After an error TurboJPEG's handle can carry state into the next call (seen: a good file
  // read as 0x0 after a corrupt header), so every error path replaces the handle.
  absl::Status Fail(absl::Status error);
  std::unique_ptr<void, HandleCloser> handle_;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_JPEG_H_
