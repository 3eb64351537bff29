// `ddpio synth`: a synthetic but learnable ImageFolder of JPEGs.
//
// Class c draws shape c % 8 (disk, square, triangle, cross, ring, bars, diamond, band) in a
// class hue (golden-ratio spaced), on a random low-saturation background, with jitter in
// position, size, colour and image size (0.8-1.25x) and per-pixel noise: a small model can tell
// the classes apart, but not trivially. Every image depends only on (seed, class, index), so
// the output is identical for a seed whatever the thread count. The folder is built under
// OUT.partial and renamed into place at the end: a failed run leaves no half-made dataset.
#ifndef DDPIO_TOOLS_SYNTH_H_
#define DDPIO_TOOLS_SYNTH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::tools {

struct SynthOptions {
  std::string out;
  int classes = 10;
  int per_class = 100;
  int size = 64;  // nominal side in pixels; each image is 0.8-1.25x in each dimension
  uint64_t seed = 0;
  int quality = 90;  // JPEG quality
  int threads = 0;   // 0: all cores
  bool progress = true;
};

struct SynthSummary {
  uint64_t images = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// One synthetic image as RGB pixels (for tests and the encoder).
struct SynthImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
};
SynthImage DrawSynthImage(int label, uint64_t index, int size, uint64_t seed);

// The class folder name for label `c` of `classes` ("class_007").
std::string SynthClassName(int c, int classes);

// AlreadyExists when OUT exists; InvalidArgument for non-positive counts or sizes outside
// [8, 4096]; errors from the filesystem with the path.
absl::StatusOr<SynthSummary> RunSynth(const SynthOptions& options);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_SYNTH_H_
