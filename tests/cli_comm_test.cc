// `ddpio bench comm` under `ddpio launch`: real processes, Gloo over loopback.
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace ddpio {
namespace {

using testing::RunDdpio;

nlohmann::json RankZeroJson(const std::string& out) {
  const std::string prefix = "[rank 0] {";
  auto at = out.rfind(prefix);
  EXPECT_NE(at, std::string::npos) << out;
  if (at == std::string::npos) return {};
  auto end = out.find('\n', at);
  return nlohmann::json::parse(out.substr(at + prefix.size() - 1, end - at - prefix.size() + 1));
}

TEST(CliComm, BenchCommUnderTheLauncherForWorldAndGroups) {
  const std::string bin = testing::DdpioBin();
  auto world = RunDdpio({"launch", "--nproc-per-node", "2", "--", bin, "bench", "comm", "--size", "1048576",
                         "--repeat", "2", "--json"});
  ASSERT_EQ(world.exit_code, 0) << world.err;
  auto j = RankZeroJson(world.out);
  EXPECT_EQ(j["world"], 2);
  EXPECT_EQ(j["backend"], "gloo");
  EXPECT_GT(j["allreduce_gb_per_s"].get<double>(), 0);
  EXPECT_GT(j["ceiling_tcp_gb_per_s"].get<double>(), 0);
  EXPECT_NE(world.err.find("rank 1 broadcast/rendezvous.cc"), std::string::npos)  // rank on log lines
      << world.err;
  auto groups = RunDdpio({"launch", "--nproc-per-node", "4", "--", bin, "bench", "comm", "--size", "65536",
                          "--repeat", "2", "--group-size", "2", "--layout", "strided", "--backend", "auto", "--json"});
  ASSERT_EQ(groups.exit_code, 0) << groups.err;
  auto g = RankZeroJson(groups.out);
  EXPECT_EQ(g["group_size"], 2);
  EXPECT_EQ(g["layout"], "strided");
  EXPECT_NE(groups.err.find("backend auto: gloo"), std::string::npos) << groups.err;
  // A group size that does not divide the world is refused by every rank, and the job fails.
  auto bad = RunDdpio({"launch", "--nproc-per-node", "3", "--", bin, "bench", "comm", "--group-size", "2"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("does not divide"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace ddpio
