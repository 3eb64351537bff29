// Augmentation geometry with torchvision semantics, as pure functions of the image size and
// (seed, epoch, sample index): a sample gets the same crop and flip whichever rank, worker or
// thread processes it (the group feeder relies on this).
//
//   training:   RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)) + RandomHorizontalFlip
//               (p = 0.5): torchvision's get_params loop (10 tries, then the central-crop
//               fallback), drawing from our own per-sample generator instead of torch's global one;
//   evaluation: Resize(resize_size) of the shorter side, then CenterCrop(size), expressed as the
//               equivalent source box (resizing then cropping equals resampling the box).
#ifndef DDPIO_LOADER_AUGMENT_H_
#define DDPIO_LOADER_AUGMENT_H_

#include <cstdint>

#include "ddpio/loader/resize.h"

namespace ddpio::loader {

struct AugmentOptions {
  bool train = true;
  int size = 224;           // output width, and height unless `height` is set
  int height = 0;           // output height; 0: `size` (square)
  double scale_min = 0.08;  // RandomResizedCrop scale range
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;  // RandomResizedCrop aspect-ratio range
  double ratio_max = 4.0 / 3.0;
  double flip_probability = 0.5;  // 0 disables the flip
  int resize_size = 0;  // evaluation: shorter side before the crop; 0 = max side * 256 / 224

  int out_width() const { return size; }
  int out_height() const { return height > 0 ? height : size; }
};

// Crop (top i, left j, height h, width w) in source pixels, as torchvision's get_params returns.
struct CropParams {
  int i = 0, j = 0, h = 0, w = 0;
};

struct SampleGeometry {
  Box box;  // source region to resample into size x size
  bool flip = false;
};

// torchvision RandomResizedCrop.get_params with our generator seeded by (seed, epoch, index).
CropParams RandomResizedCropParams(int width, int height, const AugmentOptions& options,
                                   uint64_t seed, uint64_t epoch, uint64_t index, bool* flip);

// The whole geometry of one sample (train or eval per options.train).
SampleGeometry PlanSample(int width, int height, const AugmentOptions& options, uint64_t seed,
                          uint64_t epoch, uint64_t index);

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_AUGMENT_H_
