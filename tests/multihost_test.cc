// ddpio across hosts: two simulated nodes (network namespaces joined by a bridge, made and
// removed by scripts/sim-cluster.sh), each running `ddpio launch --nnodes 2 --node-rank I`, as a
// real two-node job is started. Every rank must advertise its node's address (10.77.0.x), never
// loopback, and every job must give exactly what the same job gives on one host: the same
// indices on every rank, the same trained parameters. Needs root (namespaces); without it
// every test says why and is skipped. ctest label: multihost.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/support/rank_lines.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

using testing::RankLines;
using testing::RunDdpio;
using testing::RunResult;

const std::string kSim = std::string(DDPIO_SOURCE_DIR) + "/scripts/sim-cluster.sh";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class MultiHost : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "multi-host tests need root to make network namespaces (ip netns add); not root here";
      return;
    }
    dir_ = new testing::TempDir();
    RemoveStaleClusters();
    name_ = "mh" + std::to_string(getpid() % 100000000);
    RunResult up = testing::Run({kSim, "up", "--nodes", "2", "--name", name_});
    ASSERT_EQ(up.exit_code, 0) << up.err;
    up_ = true;
    ASSERT_EQ(RunDdpio({"synth", "--out", dir_->Sub("src"), "--classes", "3", "--per-class", "20",
                        "--size", "40", "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(RunDdpio({"convert", "--src", dir_->Sub("src"), "--out", dir_->Sub("db"), "--quiet"})
                  .exit_code,
              0);
  }
  static void TearDownTestSuite() {
    if (up_) {
      RunResult down = testing::Run({kSim, "down", name_});
      EXPECT_EQ(down.exit_code, 0) << down.err;
      // Nothing of the cluster is left: no namespace of its name.
      RunResult list = testing::Run({"/sbin/ip", "netns", "list"});
      EXPECT_EQ(list.exit_code, 0) << list.err;
      EXPECT_EQ(list.out.find(name_), std::string::npos) << list.out;
    }
    up_ = false;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  // A run killed at its timeout leaves its cluster ("mh<pid>"); the next run removes those
  // whose process is gone (never another live test's).
  static void RemoveStaleClusters() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/run/ddpio-sim", ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("mh", 0) != 0 || name.find_first_not_of("0123456789", 2) != std::string::npos)
        continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name.substr(2)));
      if (kill(pid, 0) == 0 || errno != ESRCH) continue;
      RunResult down = testing::Run({kSim, "down", name});
      EXPECT_EQ(down.exit_code, 0) << "removing the stale cluster " << name << ": " << down.err;
    }
  }

  // `args` on 2 nodes x 2 ranks (world 4), the way a multi-node job is started.
  static RunResult AcrossHosts(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kSim,
                                     "launch",
                                     name_,
                                     "--nproc-per-node",
                                     "2",
                                     "--timeout",
                                     "240",
                                     "--ddpio",
                                     testing::DdpioBin(),
                                     "--",
                                     testing::DdpioBin()};
    argv.insert(argv.end(), args.begin(), args.end());
    testing::RunOptions o;
    o.timeout = std::chrono::seconds(300);
    return testing::Run(argv, o);
  }
  // The same on one host: 4 ranks on loopback.
  static RunResult OneHost(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"launch", "--nproc-per-node", "4", "--", testing::DdpioBin()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunDdpio(argv);
  }
  // Every rank's "joined job" line names the address it advertises: its node's.
  static void ExpectNodeAddresses(const std::string& err) {
    const std::regex joined(
        R"(\[node (\d)\] \[rank (\d)\] .*joined job .* advertising ([0-9.]+): route to MASTER_ADDR 10\.77\.0\.1 via eth0)");
    int seen = 0;
    for (auto it = std::sregex_iterator(err.begin(), err.end(), joined);
         it != std::sregex_iterator(); ++it) {
      const int node = std::stoi((*it)[1]);
      EXPECT_EQ((*it)[3].str(), "10.77.0." + std::to_string(node + 1)) << (*it)[0];
      EXPECT_EQ(std::stoi((*it)[2]) / 2, node) << (*it)[0];  // ranks are node-major
      ++seen;
    }
    EXPECT_EQ(seen, 4) << err;
  }

  static std::string skip_;
  static std::string name_;
  static bool up_;
  static testing::TempDir* dir_;
};
std::string MultiHost::skip_;
std::string MultiHost::name_;
bool MultiHost::up_ = false;
testing::TempDir* MultiHost::dir_ = nullptr;

TEST_F(MultiHost, BenchCommConnectsEveryRankOverTheNodesAddresses) {
  RunResult r = AcrossHosts({"bench", "comm", "--size", "1048576", "--repeat", "2", "--group-size",
                             "2", "--layout", "strided", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectNodeAddresses(r.err);
  auto lines = RankLines(r.out);
  ASSERT_EQ(lines.count(0), 1u) << r.out;
  EXPECT_EQ(lines[0]["world"], 4);
  EXPECT_GT(lines[0]["broadcast_gb_per_s"].get<double>(), 0);
  EXPECT_GT(lines[0]["ceiling_tcp_gb_per_s"].get<double>(),
            0);  // rank 0 reached rank 1's advertised address
}

// Group feeding across hosts gives every rank exactly what it gets on one host: shard with
// groups spanning both nodes (contiguous groups of 4), replicate through the chain with strided
// groups (each group has a member on each node) and through the star.
TEST_F(MultiHost, BenchFeedGivesEveryRankWhatItGetsOnOneHost) {
  const std::vector<std::vector<std::string>> configs = {
      {"--mode", "shard", "--group-size", "4"},
      {"--mode", "replicate", "--group-size", "2", "--layout", "strided"},
      {"--mode", "replicate", "--group-size", "4", "--payload", "decoded", "--relay", "star"},
      {"--mode", "replicate", "--group-size", "4", "--readers", "all"}};
  for (size_t c = 0; c < configs.size(); ++c) {
    auto run = [&](bool many, const std::string& prefix) {
      std::vector<std::string> args = {"bench",        "feed", "--data",        dir_->Sub("db"),
                                       "--batch-size", "4",    "--image-size",  "16",
                                       "--workers",    "1",    "--epochs",      "2",
                                       "--timeout",    "60",   "--indices-out", prefix,
                                       "--json"};
      args.insert(args.end(), configs[c].begin(), configs[c].end());
      return many ? AcrossHosts(args) : OneHost(args);
    };
    const std::string hosts = dir_->Sub("hosts" + std::to_string(c)),
                      one = dir_->Sub("one" + std::to_string(c));
    RunResult a = run(true, hosts);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    RunResult b = run(false, one);
    ASSERT_EQ(b.exit_code, 0) << b.err;
    ExpectNodeAddresses(a.err);
    auto la = RankLines(a.out), lb = RankLines(b.out);
    ASSERT_EQ(la.size(), 4u) << a.out;
    for (int rank = 0; rank < 4; ++rank) {
      const std::string file = ".rank" + std::to_string(rank) + ".txt";
      const std::string got = ReadFile(hosts + file);
      EXPECT_FALSE(got.empty()) << "config " << c << " rank " << rank;
      EXPECT_EQ(got, ReadFile(one + file)) << "config " << c << " rank " << rank;
      EXPECT_EQ(la[rank]["records_read"], lb[rank]["records_read"])
          << "config " << c << " rank " << rank;
      EXPECT_EQ(la[rank]["images"], lb[rank]["images"]) << "config " << c << " rank " << rank;
    }
  }
}

// The object store behind a link of its own (`sim-cluster.sh run --store s3`: Ceph's gateway in
// its own namespace, the dataset uploaded to it): replicate G=4 over both nodes fetches each
// record once, by the leader alone; with every member fetching, each rank fetches every record.
// The run makes and removes its own cluster: nothing of it is left, no gateway process either.
TEST_F(MultiHost, AStoreBehindItsOwnLinkIsFetchedOnlyByTheLeaders) {
  auto run = [&](const std::string& readers) {
    testing::RunOptions o;
    o.timeout = std::chrono::seconds(300);
    return testing::Run({kSim,
                         "run",
                         "--store",
                         "s3",
                         "--data",
                         dir_->Sub("db"),
                         "--nodes",
                         "2",
                         "--ranks-per-node",
                         "2",
                         "--mode",
                         "replicate",
                         "--group-size",
                         "4",
                         "--layout",
                         "strided",
                         "--payload",
                         "decoded",
                         "--readers",
                         readers,
                         "--link-mbit",
                         "0",
                         "--store-link-mbit",
                         "0",
                         "--batch-size",
                         "4",
                         "--image-size",
                         "16",
                         "--timeout",
                         "240",
                         "--ddpio",
                         testing::DdpioBin()},
                        o);
  };
  for (const std::string readers : {"leader", "all"}) {
    RunResult r = run(readers);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.rfind('{')));
    const bool leader = readers == "leader";
    EXPECT_EQ(j["images"], 4 * 60) << readers;  // every member gets the group's stream
    EXPECT_EQ(j["store_records_fetched"], leader ? 60 : 4 * 60) << readers;
    EXPECT_EQ(j["store_ranks_fetching"],
              leader ? nlohmann::json::array({0}) : nlohmann::json::array({0, 1, 2, 3}))
        << readers;
    EXPECT_EQ(j["store_retries"], 0) << readers;
    // The store's link carried at least the records (and the peers' decoded batches did not).
    EXPECT_GT(j["storage_bytes_read"].get<uint64_t>(), j["ddpio_bytes_read"].get<uint64_t>());
  }
  RunResult pids = testing::Run({"/usr/bin/pgrep", "-f", "ddpio-sim-.*-s3"});
  EXPECT_NE(pids.exit_code, 0) << "a gateway of the simulated store is still running: " << pids.out;
}

TEST_F(MultiHost, TrainAcrossHostsEndsWithTheOneHostParameters) {
  const std::vector<std::string> args = {"train",
                                         "--data",
                                         dir_->Sub("db"),
                                         "--epochs",
                                         "2",
                                         "--batch-size",
                                         "4",
                                         "--image-size",
                                         "16",
                                         "--hidden",
                                         "16",
                                         "--workers",
                                         "1",
                                         "--group-size",
                                         "2",
                                         "--layout",
                                         "strided",
                                         "--timeout",
                                         "60",
                                         "--json"};
  RunResult a = AcrossHosts(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  RunResult b = OneHost(args);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ExpectNodeAddresses(a.err);
  auto la = RankLines(a.out), lb = RankLines(b.out);
  ASSERT_EQ(la.size(), 4u) << a.out;
  ASSERT_EQ(lb.size(), 4u) << b.out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(la[rank]["param_checksum"], lb[0]["param_checksum"]) << "rank " << rank;
    EXPECT_EQ(la[rank]["steps"], lb[rank]["steps"]) << "rank " << rank;
    EXPECT_EQ(la[rank]["train_loss"], lb[rank]["train_loss"]) << "rank " << rank;
  }
}

// A node lost for good, mid-epoch (`sim-cluster.sh fault`: every process in its namespace
// SIGKILLed, as a power loss would), on 3 nodes x 2 ranks in groups of 2 spread over the nodes;
// the lost node holds a group's leader and another group's member. With `--agent script` the
// survivors must each exit on their own within the job's --timeout, non-zero; the script then
// starts the job on them. With `--agent torchrun` every node runs torchrun's elastic agent
// (--nnodes 2:3, c10d on node 0) and the agents restart the survivors as a world of 4 by
// themselves. Either way the job resumes from its last checkpoint with groups and leaders
// re-formed, and the tally of every rank's trained indices over both attempts holds: every
// sample of every epoch exactly twice (replicate: both members of a group train it), none lost,
// none repeated, the steps since the checkpoint redone. Each run makes and removes its cluster.
TEST_F(MultiHost, ANodeLostMidEpochTheSurvivorsFinishWithEverySampleExactlyOnce) {
  for (const std::string agent : {"script", "torchrun"}) {
    if (agent == "torchrun" &&
        testing::Run({"/usr/bin/python3", "-c", "import torch.distributed.run"}).exit_code != 0) {
      ADD_FAILURE() << "torchrun is missing (Debian's python3-torch; scripts/install-deps.sh)";
      continue;
    }
    testing::RunOptions o;
    o.timeout = std::chrono::seconds(800);
    RunResult r = testing::Run({kSim,
                                "fault",
                                "--agent",
                                agent,
                                "--data",
                                dir_->Sub("db"),
                                "--nodes",
                                "3",
                                "--ranks-per-node",
                                "2",
                                "--mode",
                                "replicate",
                                "--group-size",
                                "2",
                                "--layout",
                                "strided",
                                "--link-mbit",
                                "0",
                                "--epochs",
                                "3",
                                "--batch-size",
                                "4",
                                "--image-size",
                                "16",
                                "--kill-node",
                                "1",
                                "--kill-after-step",
                                "3",
                                "--checkpoint-every",
                                "2",
                                "--job-timeout",
                                "30",
                                "--timeout",
                                "300",
                                "--ddpio",
                                testing::DdpioBin()},
                               o);
    ASSERT_EQ(r.exit_code, 0) << agent << ": " << r.err << r.out;
    const auto j = nlohmann::json::parse(testing::LastLine(r.out));
    EXPECT_TRUE(j["tally_ok"]) << agent << ": " << j.dump();
    EXPECT_EQ(j["samples_lost"], 0) << agent;
    EXPECT_EQ(j["samples_repeated"], 0) << agent;
    ASSERT_EQ(j["attempts"].size(), 2u) << agent << ": " << j.dump();
    EXPECT_EQ(j["attempts"][0]["world"], 6) << agent;
    EXPECT_EQ(j["attempts"][1]["world"], 4) << agent << ": the survivors, re-formed";
    EXPECT_GE(j["attempts"][1]["step"].get<int>(), 2) << agent << ": resumed from a checkpoint";
    if (agent == "script") {
      for (const auto& [node, code] : j["survivor_exit_codes"].items())
        EXPECT_EQ(code, 1) << "node " << node << " must fail, not hang or pass";
      // Each survivor noticed within the job's --timeout (30 s: slow enough for the sanitizer
      // builds), with the exit's and the census's margin (2.5 heartbeats of 1.5 s).
      EXPECT_LT(j["detection_max_s"].get<double>(), 38.0) << j.dump();
      // Each names the peers that vanished — node 1's ranks, by the address they advertised —
      // or, when it timed out after rank 0 had already failed and left (taking the store it
      // serves), says that; at least one names them.
      int named = 0;
      for (const auto& [node, error] : j["survivor_errors"].items()) {
        const std::string e = error.get<std::string>();
        const bool names = e.find("ranks 2, 3 (10.77.0.2) stopped answering") != std::string::npos;
        named += names;
        EXPECT_TRUE(names || e.find("the job's store (") != std::string::npos)
            << "node " << node << ": " << e;
      }
      EXPECT_GE(named, 1) << j.dump();
    } else {
      EXPECT_EQ(j["restarts"], 1) << j.dump();
    }
  }
  // Each run made its own cluster ("ds" and 6 hex digits) and removed it.
  RunResult list = testing::Run({"/sbin/ip", "netns", "list"});
  EXPECT_FALSE(std::regex_search(list.out, std::regex("(^|\\n)ds[0-9a-f]{6}-")))
      << "a fault run left its cluster: " << list.out;
}

}  // namespace
}  // namespace ddpio
