// `ddpio bench sampler`: one epoch's permutation plus one rank's share, timed next to PyTorch's
// DistributedSampler in the same run (when a python3 with torch is found).
#ifndef DDPIO_TOOLS_BENCH_SAMPLER_H_
#define DDPIO_TOOLS_BENCH_SAMPLER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/sampler/distributed_sampler.h"

namespace ddpio::tools {

struct BenchSamplerOptions {
  uint64_t size = 1281167;  // ImageNet-1k train
  int world = 64;
  int rank = 0;
  int repeat = 21;
  bool compare_torch = true;
  sampler::PermutationKind permutation = sampler::PermutationKind::kTorch;
};
absl::StatusOr<nlohmann::json> BenchSampler(const BenchSamplerOptions& options);
std::string BenchSamplerText(const nlohmann::json& result);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_BENCH_SAMPLER_H_
