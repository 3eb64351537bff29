// `ddpio sampler`: the sampler's answers from the command line ("which samples did rank 3 see
// in epoch 5?").
#ifndef DDPIO_TOOLS_SAMPLER_H_
#define DDPIO_TOOLS_SAMPLER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/sampler/distributed_sampler.h"

namespace ddpio::tools {

struct SamplerQuery {
  sampler::SamplerOptions options;
  int rank = 0;
  uint64_t epoch = 0;
  uint64_t consumed = 0;         // entries of the epoch's order already consumed
  std::optional<int> new_world;  // elastic continuation on another world size
  uint64_t batch_size = 0;       // 0: no batches
  bool drop_last_batch = false;
};

// The JSON answer: rank, world, epoch, start, count, indices, padded (positions in indices),
// and batches when asked. InvalidArgument for a rank outside the world or consumed > size.
absl::StatusOr<nlohmann::json> QuerySampler(const SamplerQuery& query);
std::string SamplerText(const nlohmann::json& answer);

// The epoch's shuffle quality (sampler/shuffle_quality.h) over every rank of the world, for a
// dataset stored sorted into `classes` classes, in batches of query.batch_size (default 256):
// the query's order, the exact order and i.i.d. draws side by side. InvalidArgument for 0 classes.
absl::StatusOr<nlohmann::json> QueryShuffleQuality(const SamplerQuery& query, uint64_t classes);
std::string ShuffleQualityText(const nlohmann::json& answer);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_SAMPLER_H_
