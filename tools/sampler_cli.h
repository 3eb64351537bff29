// `ddpio sampler` and `ddpio bench sampler`: the sampler's answers and speed from the command
// line ("which samples did rank 3 see in epoch 5?").
#ifndef DDPIO_TOOLS_SAMPLER_CLI_H_
#define DDPIO_TOOLS_SAMPLER_CLI_H_

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ddpio/sampler/distributed_sampler.h"

namespace ddpio::tools {

struct SamplerQuery {
  sampler::SamplerOptions options;
  int rank = 0;
  uint64_t epoch = 0;
  uint64_t consumed = 0;             // entries of the epoch's order already consumed
  std::optional<int> new_world;      // elastic continuation on another world size
  uint64_t batch_size = 0;           // 0: no batches
  bool drop_last_batch = false;
};

// The JSON answer: rank, world, epoch, start, count, indices, padded (positions in indices),
// and batches when asked. InvalidArgument for a rank outside the world or consumed > size.
absl::StatusOr<nlohmann::json> QuerySampler(const SamplerQuery& query);
std::string SamplerText(const nlohmann::json& answer);

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

#endif  // DDPIO_TOOLS_SAMPLER_CLI_H_
