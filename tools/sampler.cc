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
#include "ddpio/sampler/shuffle_quality.h"

namespace ddpio::tools {

absl::StatusOr<nlohmann::json> QuerySampler(const SamplerQuery& q) {
  sampler::SamplerOptions o = q.options;
  const int old_world = o.num_replicas;
  if (q.new_world.has_value()) {
    // The block order's lanes are those the epoch was dealt to (as a resumed job keeps them).
    if (o.order == sampler::Order::kBlock && o.block.lanes == 0) {
      o.block.lanes = static_cast<uint64_t>(o.num_replicas);
    }
    o.num_replicas = *q.new_world;
  }
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
                      {"order", sampler::OrderName(o.order)},
                      {"start", start},
                      {"count", stream.indices.size()},
                      {"indices", stream.indices},
                      {"padded", stream.padded}};
  if (q.new_world.has_value()) j["previous_world"] = old_world;
  if (o.order == sampler::Order::kBlock) j["lanes"] = plan.lanes();
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

absl::StatusOr<nlohmann::json> QueryShuffleQuality(const SamplerQuery& q, uint64_t classes) {
  if (classes == 0) return absl::InvalidArgumentError("--quality takes a class count >= 1");
  constexpr uint64_t kMaxMeasured = uint64_t{1} << 28;
  const uint64_t batch_size = q.batch_size > 0 ? q.batch_size : 256;
  if (batch_size > (uint64_t{1} << 16) ||
      batch_size * static_cast<uint64_t>(q.options.num_replicas) > (uint64_t{1} << 26)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--quality measures batches of at most 65536 and steps (batch x world) of at most ",
        uint64_t{1} << 26, " samples; got batch ", batch_size, " x world ",
        q.options.num_replicas));
  }
  if (q.options.dataset_size > kMaxMeasured) {
    return absl::InvalidArgumentError(
        absl::StrCat("--quality measures datasets of up to ", kMaxMeasured,
                     " samples (it holds two orders of the epoch and walks every sample); got ",
                     q.options.dataset_size));
  }
  const uint64_t batch = q.batch_size > 0 ? q.batch_size : 256;
  const auto measure = [&](const sampler::SamplerOptions& o) -> absl::StatusOr<nlohmann::json> {
    DDPIO_ASSIGN_OR_RETURN(auto s, sampler::DistributedSampler::Create(o));
    DDPIO_ASSIGN_OR_RETURN(auto plan, s.Plan(q.epoch));
    const sampler::ShuffleQuality m = sampler::MeasureShuffleQuality(plan, classes, batch);
    return nlohmann::json{{"batches", m.batches},
                          {"distinct_classes", m.distinct_classes},
                          {"class_distance", m.class_distance},
                          {"steps", m.steps},
                          {"step_classes", m.step_classes},
                          {"step_class_distance", m.step_class_distance},
                          {"position_jump", m.position_jump},
                          {"iid_distinct_classes", m.iid_distinct_classes},
                          {"iid_class_distance", m.iid_class_distance},
                          {"iid_step_classes", m.iid_step_classes},
                          {"iid_step_class_distance", m.iid_step_class_distance}};
  };
  nlohmann::json j = {{"size", q.options.dataset_size},
                      {"world", q.options.num_replicas},
                      {"epoch", q.epoch},
                      {"classes", classes},
                      {"batch_size", batch},
                      {"shuffle", q.options.shuffle}};
  sampler::SamplerOptions exact = q.options;
  exact.order = sampler::Order::kExact;
  DDPIO_ASSIGN_OR_RETURN(j["exact"], measure(exact));
  if (q.options.order == sampler::Order::kBlock) {
    DDPIO_ASSIGN_OR_RETURN(j["block"], measure(q.options));
    j["block"]["chunk"] = q.options.block.chunk_records;
    j["block"]["window"] = q.options.block.window;
    j["block"]["lanes"] = sampler::BlockLanes(q.options.block, q.options.num_replicas);
  }
  return j;
}

std::string ShuffleQualityText(const nlohmann::json& j) {
  std::string out = absl::StrFormat(
      "shuffle quality: %d samples stored sorted into %d classes, %d ranks, batches of %d, epoch "
      "%d\n  %-40s %24s %24s %9s\n  %-40s %12s %11s %12s %11s %9s\n",
      j["size"].get<uint64_t>(), j["classes"].get<uint64_t>(), j["world"].get<int>(),
      j["batch_size"].get<uint64_t>(), j["epoch"].get<uint64_t>(), "", "a rank's batch",
      "a step (every rank's)", "position", "order", "classes", "distance", "classes", "distance",
      "jump");
  const auto row = [&](const std::string& name, const nlohmann::json& m, const char* prefix) {
    const auto get = [&](const char* key) { return m[absl::StrCat(prefix, key)].get<double>(); };
    absl::StrAppendFormat(&out, "  %-40s %12.1f %11.3f %12.1f %11.3f %9.3f\n", name,
                          get("distinct_classes"), get("class_distance"), get("step_classes"),
                          get("step_class_distance"),
                          std::string(prefix).empty() ? m["position_jump"].get<double>() : 1.0 / 3);
  };
  if (j.contains("block")) {
    const nlohmann::json& b = j["block"];
    row(absl::StrFormat("block (%d a chunk, window %d, %d lanes)", b["chunk"].get<uint64_t>(),
                        b["window"].get<uint64_t>(), b["lanes"].get<uint64_t>()),
        b, "");
  }
  row("exact", j["exact"], "");
  row("i.i.d. draws", j["exact"], "iid_");
  out +=
      "  (classes: distinct classes in the batch, more is better; distance: total variation of "
      "the batch's class mix from the dataset's, nearer the i.i.d. row is better; position jump: "
      "mean |i - previous i| / n on a rank, 1/3 for a uniform shuffle)\n";
  return out;
}

std::string SamplerText(const nlohmann::json& j) {
  std::string out = absl::StrFormat(
      "rank %d of %d, epoch %d, %s padding, %s order, from entry %d of %d: %d samples (%d padding, "
      "marked *)\n",
      j["rank"].get<int>(), j["world"].get<int>(), j["epoch"].get<uint64_t>(),
      j["padding"].get<std::string>(),
      absl::StrCat(j.value("order", "exact") == "block" ? "block " : "",
                   j["shuffle"].get<bool>() ? j["permutation"].get<std::string>() : "sequential"),
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
