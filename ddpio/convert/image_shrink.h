// `ddpio convert --max-side N`: images whose longer side exceeds N are stored smaller, as FFCV's
// max_resolution does — fewer bytes to read and far fewer pixels to decode for every epoch.
//
// The image is decoded through the loader's own decoder (so CMYK and gray JPEGs become the RGB
// the loader would see), resampled to a longer side of N with the loader's resampler (Pillow's
// antialiased bilinear, as torchvision's Resize), and stored as a baseline JPEG (libjpeg-turbo,
// 4:2:0, the given quality); raw records stay raw, resampled. The record keeps the original
// geometry (record.h, layout 2). Images already small enough keep their bytes; nothing is
// upscaled. Not thread-safe: one Shrinker per converting thread.
#ifndef DDPIO_CONVERT_IMAGE_SHRINK_H_
#define DDPIO_CONVERT_IMAGE_SHRINK_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/loader/resize.h"
#include "ddpio/loader/sample_processor.h"
#include "ddpio/storage/record.h"

namespace ddpio::convert {

struct ShrinkOptions {
  int max_side = 0;  // 0: off
  int quality = 90;  // JPEG quality of re-encoded images (FFCV's default)
};

// The stored size of a width x height image: the longer side becomes max_side, the shorter is
// scaled by the same factor and rounded (at least 1); unchanged when it already fits.
std::pair<int, int> ShrunkSize(int width, int height, int max_side);

class Shrinker {
 public:
  // Internal when TurboJPEG cannot allocate a compressor.
  static absl::StatusOr<std::unique_ptr<Shrinker>> Create(const ShrinkOptions& options);
  ~Shrinker();

  // Shrinks `*record` in place when its longer side exceeds max_side; true when it did.
  // DataLoss when the image does not decode (as the loader would report it).
  absl::StatusOr<bool> Apply(storage::Record* record);

 private:
  explicit Shrinker(const ShrinkOptions& options, void* compressor);
  ShrinkOptions options_;
  void* compressor_;  // tjhandle
  loader::SampleProcessor decoder_;
  loader::Resampler resampler_;
  std::vector<uint8_t> full_, small_;
};

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_IMAGE_SHRINK_H_
