// `ddpio bench loader`: the loader's images/s next to the JPEG full-decode ceiling, one run.
//
// Ceiling: tjDecompress2 full decodes of records spread over the dataset, as many decoders at
// once as the loader has workers, measured before each measured epoch and after the last; one
// decoder alone is printed beside it. The loader runs --warmup-epochs epochs that are left out of
// the figures, then --epochs epochs with a consumer that takes batches as fast as they come;
// figures are medians over the measured epochs, stages are summed over workers.
#ifndef DDPIO_TOOLS_BENCH_LOADER_H_
#define DDPIO_TOOLS_BENCH_LOADER_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/pipeline/pipeline_options.h"

namespace ddpio::tools {

struct BenchLoaderOptions {
  std::string data;
  // The loader's settings (and an s3:// dataset's cache flags), as the settings table
  // (ddpio/pipeline/settings.h) defines them.
  PipelineOptions settings;
  int epochs = 3;
  int warmup_epochs = 1;          // run first, not measured
  uint64_t ceiling_images = 400;  // records decoded for the ceiling
  // Entropy decoder of restart-marked JPEGs: ddpio's own (the default) or libjpeg's.
  bool own_huffman = true;
};

absl::StatusOr<nlohmann::json> BenchLoader(const BenchLoaderOptions& options);
std::string BenchLoaderText(const nlohmann::json& result);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_BENCH_LOADER_H_
