// Every reference vector written by a real torch.utils.data.DistributedSampler run
// (tests/data/torch_sampler_vectors.json, from PyTorch 1.13) must match.
#include <fstream>
#include <nlohmann/json.hpp>

#include "ddpio/sampler/distributed_sampler.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::sampler {
namespace {

TEST(TorchParity, EveryReferenceVectorMatches) {
  std::ifstream in(DDPIO_TORCH_VECTORS);
  ASSERT_TRUE(in) << "missing " << DDPIO_TORCH_VECTORS;
  nlohmann::json doc = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    SamplerOptions o;
    o.dataset_size = c["size"].get<uint64_t>();
    o.num_replicas = c["world"].get<int>();
    o.seed = c["seed"].get<uint64_t>();
    o.shuffle = c["shuffle"].get<bool>();
    o.padding = c["drop_last"].get<bool>() ? Padding::kDrop : Padding::kPad;
    ASSERT_OK_AND_ASSIGN(DistributedSampler s, DistributedSampler::Create(o));
    ASSERT_OK_AND_ASSIGN(EpochPlan plan, s.Plan(c["epoch"].get<uint64_t>()));
    const int rank = c["rank"].get<int>();
    RankStream stream = plan.Stream(rank);
    auto want = c["indices"].get<std::vector<uint64_t>>();
    ASSERT_EQ(stream.indices.size(), c["count"].get<uint64_t>()) << c.dump();
    ASSERT_LE(want.size(), stream.indices.size());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), stream.indices.begin())) << c.dump();
    ++checked;
  }
  EXPECT_EQ(checked, 720);
}

}  // namespace
}  // namespace ddpio::sampler
