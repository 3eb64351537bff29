#include "tools/sampler.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::tools {

absl::StatusOr<nlohmann::json> QuerySampler(const SamplerQuery& q) {
  sampler::SamplerOptions o = q.options;
  const int old_world = o.num_replicas;
  if (q.new_world.has_value()) o.num_replicas = *q.new_world;
  if (q.rank < 0 || q.rank >= o.num_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", q.rank, " is outside the world [0, ", o.num_replicas, ")"));
  }
  DDPIO_ASSIGN_OR_RETURN(auto sampler, sampler::DistributedSampler::Create(o));
  const uint64_t start = std::min(q.consumed, o.dataset_size);
  DDPIO_ASSIGN_OR_RETURN(auto plan, sampler.Plan(q.epoch, start));
  sampler::RankStream stream = plan.Stream(q.rank);
  nlohmann::json j = {{"rank", q.rank},
                      {"world", o.num_replicas},
                      {"epoch", q.epoch},
                      {"size", o.dataset_size},
                      {"seed", o.seed},
                      {"shuffle", o.shuffle},
                      {"padding", sampler::PaddingName(o.padding)},
                      {"permutation", sampler::PermutationKindName(o.permutation)},
                      {"start", start},
                      {"count", stream.indices.size()},
                      {"indices", stream.indices},
                      {"padded", stream.padded}};
  if (q.new_world.has_value()) j["previous_world"] = old_world;
  if (q.batch_size > 0) {
    nlohmann::json batches = nlohmann::json::array();
    for (const auto& b :
         sampler::MakeBatches(stream.indices.size(), q.batch_size, q.drop_last_batch)) {
      batches.push_back(
          std::vector<uint64_t>(stream.indices.begin() + b.begin, stream.indices.begin() + b.end));
    }
    j["batches"] = batches;
  }
  return j;
}

std::string SamplerText(const nlohmann::json& j) {
  std::string out = absl::StrFormat(
      "rank %d of %d, epoch %d, %s padding, %s order, from entry %d of %d: %d samples (%d padding, "
      "marked *)\n",
      j["rank"].get<int>(), j["world"].get<int>(), j["epoch"].get<uint64_t>(),
      j["padding"].get<std::string>(),
      j["shuffle"].get<bool>() ? j["permutation"].get<std::string>() : "sequential",
      j["start"].get<uint64_t>(), j["size"].get<uint64_t>(), j["count"].get<uint64_t>(),
      j["padded"].size());
  std::vector<bool> padded(j["count"].get<size_t>(), false);
  for (const auto& p : j["padded"]) padded[p.get<size_t>()] = true;
  if (j.contains("batches")) {
    size_t pos = 0, b = 0;
    for (const auto& batch : j["batches"]) {
      absl::StrAppendFormat(&out, "batch %d:", b++);
      for (const auto& v : batch)
        absl::StrAppendFormat(&out, " %d%s", v.get<uint64_t>(), padded[pos++] ? "*" : "");
      out += "\n";
    }
    return out;
  }
  const auto& indices = j["indices"];
  for (size_t i = 0; i < indices.size(); ++i) {
    absl::StrAppendFormat(&out, "%d%s%s", indices[i].get<uint64_t>(), padded[i] ? "*" : "",
                          (i + 1) % 16 == 0 || i + 1 == indices.size() ? "\n" : " ");
  }
  return out;
}

}  // namespace ddpio::tools
