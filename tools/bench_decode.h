// `ddpio bench decode`: one thread, the same images, each way of decoding them timed in turn in
// every round (the order reversed every other round), medians over rounds — where a loader
// worker's decode time goes, and what the entropy decoder costs:
//
//   full, no markers       libjpeg-turbo's full decode of the images without restart markers
//                          (its fast Huffman path): the loader's ceiling, per thread
//   full, markers          the images as stored (restart markers), libjpeg's Huffman decoder
//                          (its slow path) and ddpio's (jpeg_huffman.h)
//   1/8, ...               the same at 1/8 scale: IDCT, upsampling and colour conversion shrink
//                          to almost nothing, so the figure is nearly all entropy decoding; and
//                          ddpio's decoder on one segment at a time instead of two
//   sample fast / exact    the loader's whole per-sample work (segments, decode, resample) with
//                          either Huffman decoder
//
// Only records with restart markers are used. Thread-compatible.
#ifndef DDPIO_TOOLS_BENCH_DECODE_H_
#define DDPIO_TOOLS_BENCH_DECODE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace ddpio::tools {

struct BenchDecodeOptions {
  std::string data;
  uint64_t images = 200;  // records spread over the dataset
  int rounds = 5;
  int image_size = 224;  // the samples' output size
};

absl::StatusOr<nlohmann::json> BenchDecode(const BenchDecodeOptions& options);
std::string BenchDecodeText(const nlohmann::json& result);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_BENCH_DECODE_H_
