// `ddpio bench comm` under `ddpio launch`: real processes, Gloo over loopback.
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"
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
  auto world = RunDdpio({"launch", "--nproc-per-node", "2", "--", bin, "bench", "comm", "--size",
                         "1048576", "--repeat", "2", "--json"});
  ASSERT_EQ(world.exit_code, 0) << world.err;
  auto j = RankZeroJson(world.out);
  EXPECT_EQ(j["world"], 2);
  EXPECT_EQ(j["backend"], "gloo");
  EXPECT_GT(j["allreduce_gb_per_s"].get<double>(), 0);
  EXPECT_GT(j["ceiling_tcp_gb_per_s"].get<double>(), 0);
  EXPECT_NE(world.err.find("rank 1 comm/rendezvous.cc"), std::string::npos)  // rank on log lines
      << world.err;
  auto groups = RunDdpio({"launch", "--nproc-per-node", "4", "--", bin, "bench", "comm", "--size",
                          "65536", "--repeat", "2", "--group-size", "2", "--layout", "strided",
                          "--backend", "auto", "--json"});
  ASSERT_EQ(groups.exit_code, 0) << groups.err;
  auto g = RankZeroJson(groups.out);
  EXPECT_EQ(g["group_size"], 2);
  EXPECT_EQ(g["layout"], "strided");
  EXPECT_NE(groups.err.find("backend auto: gloo"), std::string::npos) << groups.err;
  // A group size that does not divide the world is refused by every rank, and the job fails.
  auto bad = RunDdpio(
      {"launch", "--nproc-per-node", "3", "--", bin, "bench", "comm", "--group-size", "2"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("does not divide"), std::string::npos) << bad.err;
}

// These machines have no GPU: --backend nccl is refused by every rank, before any connection,
// with the reason; nothing hangs.
TEST(CliComm, BackendNcclWithoutADeviceIsAClearError) {
  const std::string bin = testing::DdpioBin();
  auto info = RunDdpio({"info"});
  ASSERT_EQ(info.exit_code, 0);
  if (info.out.find("GPU path") != std::string::npos)
    GTEST_SKIP() << "this machine has a CUDA device";
  auto r = RunDdpio(
      {"launch", "--nproc-per-node", "2", "--", bin, "bench", "comm", "--backend", "nccl"});
  EXPECT_NE(r.exit_code, 0);
  // Whichever rank fails first names itself; the launcher then stops the other one, which may
  // not get to print its own line.
  EXPECT_NE(r.err.find("] ddpio bench comm: error: backend nccl"), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.find("[rank 0]") != std::string::npos ||
              r.err.find("[rank 1]") != std::string::npos)
      << r.err;
  // The library says which backend to use ("gloo or auto" with NCCL built in but no device,
  // "gloo" without NCCL); the program adds the flag that sets it.
  EXPECT_NE(r.err.find("use the gloo"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("backend (see --backend)"), std::string::npos) << r.err;
}

#ifdef DDPIO_TORCH_PYTHON
// Started by the installed PyTorch's torchrun (no `ddpio launch`): the ranks find its agent's
// TCPStore on MASTER_PORT, speak its protocol, and run the benchmark. (Debian's torchrun 1.13
// needs --redirects/--tee to start processes with --no_python.)
TEST(CliComm, BenchCommUnderTorchrunUsesItsAgentStore) {
  const std::string port = std::to_string(testing::FreeLoopbackPort());
  testing::RunOptions o;
  o.timeout = std::chrono::seconds(120);
  auto r = testing::Run({DDPIO_TORCH_PYTHON,
                         "-m",
                         "torch.distributed.run",
                         "--no_python",
                         "--nproc_per_node",
                         "2",
                         "--master_port",
                         port,
                         "--redirects",
                         "1",
                         "--tee",
                         "1",
                         testing::DdpioBin(),
                         "bench",
                         "comm",
                         "--size",
                         "65536",
                         "--repeat",
                         "2",
                         "--json"},
                        o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("torchrun's agent store at 127.0.0.1:" + port), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("as rank 1 of 2 (torchrun, store torchrun agent"), std::string::npos)
      << r.err;
  const std::string prefix = "[default0]:{";
  auto at = r.out.find(prefix);
  ASSERT_NE(at, std::string::npos) << r.out;
  auto j = nlohmann::json::parse(
      r.out.substr(at + prefix.size() - 1, r.out.find('\n', at) - at - prefix.size() + 1));
  EXPECT_EQ(j["world"], 2);
  EXPECT_GT(j["allreduce_gb_per_s"].get<double>(), 0);
}
#endif

}  // namespace
}  // namespace ddpio
