// Faults around a job that trains from an object store in the block order, with the real `ddpio`
// program, real rank processes and a real S3 server (Ceph's gateway, ctest label s3): the store
// refusing requests in storms (503 SlowDown, 429), the node's cache folder full, deleted again and
// again under the job, shared by two jobs at once, and a rank killed under torchrun's elastic
// agent. In every case the job ends as the same job on the local dataset does: the same
// parameters bit for bit (a wrong byte served would change them) and every sample exactly once an
// epoch (the tally of the ranks' index logs).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/background.h"
#include "tests/support/multiprocess.h"
#include "tests/support/rank_lines.h"
#include "tests/support/s3_cli_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/torchrun.h"

namespace ddpio {
namespace {

namespace fs = std::filesystem;
using testing::RankLines;
using testing::RunDdpio;

constexpr int kEpochs = 2;

class CliS3Faults : public testing::S3CliTest {
 protected:
  void SetUp() override {
    testing::S3CliTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(RunDdpio({"upload", dir_.Sub("db"), url_, "--quiet"}).exit_code, 0);
  }

  enum class Order { kBlock, kExact };
  // `ddpio train` on `data`, in the block order (chunks of 4 records, a window of 2: the store is
  // read a chunk per GET, 15 chunks an epoch) or the exact one, then `extra`.
  static std::vector<std::string> TrainArgs(const std::string& data,
                                            const std::vector<std::string>& extra,
                                            Order order = Order::kBlock) {
    std::vector<std::string> args = {
        testing::DdpioBin(), "train", "--data",       data, "--epochs", std::to_string(kEpochs),
        "--batch-size",      "5",     "--image-size", "16", "--hidden", "16",
        "--workers",         "1",     "--timeout",    "30", "--json"};
    if (order == Order::kBlock) {
      args.insert(args.end(), {"--order", "block", "--block-chunk", "4", "--block-window", "2"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  // The same under `ddpio launch` with 2 ranks.
  static testing::RunResult Train(const std::string& data, const std::vector<std::string>& extra,
                                  const testing::RunOptions& options = {},
                                  Order order = Order::kBlock) {
    std::vector<std::string> args = {"launch", "--nproc-per-node", "2", "--"};
    for (std::string& a : TrainArgs(data, extra, order)) args.push_back(std::move(a));
    return RunDdpio(args, options);
  }

  // The parameters a 2-rank job ends with on the local dataset (every rank's are the same).
  std::string LocalChecksum(Order order = Order::kBlock, const std::string& db = "db") {
    auto r = Train(dir_.Sub(db), {}, {}, order);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto lines = RankLines(r.out);
    EXPECT_EQ(lines.size(), 2u) << r.out;
    return lines.empty() ? "" : lines.begin()->second["param_checksum"].get<std::string>();
  }

  // Checks a finished 2-rank job over the store: it succeeded, each rank ended with `want`, and
  // its index logs (`--indices-out indices`) hold every sample once an epoch. Returns its ranks'
  // store counters summed.
  nlohmann::json ExpectTrainedAsLocally(const testing::RunResult& r, const std::string& want,
                                        const std::string& indices, const std::string& what,
                                        int samples = kRecords) {
    nlohmann::json store = {{"requests", 0},
                            {"retries", 0},
                            {"throttles", 0},
                            {"records_fetched", 0},
                            {"disk_hits", 0}};
    EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
    const auto lines = RankLines(r.out);
    EXPECT_EQ(lines.size(), 2u) << what << "\n" << r.out;
    for (const auto& [rank, j] : lines) {
      EXPECT_EQ(j["param_checksum"], want) << what << ": rank " << rank << " trained on other data";
      for (auto& [key, sum] : store.items())
        sum = sum.get<uint64_t>() + j["store"][key].get<uint64_t>();
    }
    const nlohmann::json tally = testing::TallyIndices(indices, samples, kEpochs);
    EXPECT_TRUE(tally["ok"]) << what << ": " << tally.dump();
    std::printf("%s: parameters %s as locally, store %s\n", what.c_str(), want.c_str(),
                store.dump().c_str());
    return store;
  }
};

// The store behind a proxy that answers every 2nd GET itself with 503 SlowDown (as S3 answers a
// prefix asked too fast), then with 429; the block order fetching a chunk per GET, and the exact
// order record by record (--no-whole-chunks, over 80 records of ~27 KB, too far apart in the file
// to share GETs: a storm of dozens of refusals). Each rank's
// request-rate governor slows down (counted as throttles), the retries fetch what was refused, and
// the job trains as it does locally.
TEST_F(CliS3Faults, StormsOfSlowDownsAndTooManyRequestsSlowTheJobAndLoseNothing) {
  constexpr int kLarge = 80;
  ASSERT_EQ(RunDdpio({"synth", "--out", dir_.Sub("large-src"), "--classes", "2", "--per-class",
                      std::to_string(kLarge / 2), "--size", "720", "--quiet"})
                .exit_code,
            0);
  ASSERT_EQ(
      RunDdpio({"convert", "--src", dir_.Sub("large-src"), "--out", dir_.Sub("large"), "--quiet"})
          .exit_code,
      0);
  const std::string large_url = url_ + "-large";
  ASSERT_EQ(RunDdpio({"upload", dir_.Sub("large"), large_url, "--quiet"}).exit_code, 0);
  const std::string want_block = LocalChecksum(),
                    want_exact = LocalChecksum(Order::kExact, "large");
  const std::string endpoint = std::getenv("AWS_ENDPOINT_URL");
  const std::string upstream = endpoint.substr(endpoint.find("://") + 3);
  for (const std::string status : {"503", "429"}) {
    testing::Background proxy({"/usr/bin/python3", DDPIO_SOURCE_DIR "/scripts/sim/delay_proxy.py",
                               "--listen", "127.0.0.1:0", "--upstream", upstream, "--fail-every",
                               "2", "--fail-status", status});
    ASSERT_TRUE(proxy.WaitFor("\n", std::chrono::seconds(30))) << proxy.output();
    const std::string line = proxy.output(), listening = "listening ";
    ASSERT_EQ(line.rfind(listening + "127.0.0.1:", 0), 0u) << line;
    testing::RunOptions through;
    through.env["AWS_ENDPOINT_URL"] =
        "http://" + line.substr(listening.size(), line.find('\n') - listening.size());
    for (const bool whole : {true, false}) {
      const std::string what =
          "a storm of " + status + (whole ? ", block order by chunk" : ", exact order by record");
      const std::string indices = dir_.Sub("storm-" + status + (whole ? "-whole" : "-records"));
      std::vector<std::string> extra = {"--indices-out", indices};
      if (!whole) extra.push_back("--no-whole-chunks");
      const nlohmann::json store = ExpectTrainedAsLocally(
          Train(whole ? url_ : large_url, extra, through, whole ? Order::kBlock : Order::kExact),
          whole ? want_block : want_exact, indices, what, whole ? kRecords : kLarge);
      EXPECT_GT(store["retries"].get<uint64_t>(), whole ? 0u : 20u) << what << ": not retried";
      EXPECT_GT(store["throttles"].get<uint64_t>(), 0u) << what << ": the governor did not act";
      EXPECT_GE(store["records_fetched"].get<uint64_t>(),
                static_cast<uint64_t>(whole ? kRecords : kLarge))
          << what;
    }
  }
}

// A node's cache folder on a filesystem that is full after a few records (a 16 KiB tmpfs; needs
// root to mount, skipped otherwise): the ranks say they cannot write it, read what does not fit
// from the store, and train as locally.
TEST_F(CliS3Faults, ACacheFolderThatIsFullServesNothingWrong) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const std::string want = LocalChecksum();
  const std::string disk = dir_.Sub("full");
  fs::create_directories(disk);
  ASSERT_EQ(testing::Run({"/bin/mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", disk}).exit_code,
            0);
  struct Unmount {
    std::string path;
    ~Unmount() { testing::Run({"/bin/umount", path}); }
  } unmount{disk};
  auto r = Train(url_, {"--cache-dir", disk, "--indices-out", dir_.Sub("full-idx")});
  ExpectTrainedAsLocally(r, want, dir_.Sub("full-idx"), "a full cache folder");
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("records that do not fit are read from the store"), std::string::npos)
      << r.err;
}

// The cache folder emptied again and again while the job runs (`rm -rf` in a loop: the dataset's
// folder, its records and its claims file vanish under the readers): nothing wrong is served.
TEST_F(CliS3Faults, ACacheFolderDeletedUnderTheJobAgainAndAgainServesNothingWrong) {
  const std::string want = LocalChecksum();
  const std::string cache = dir_.Sub("deleted");
  fs::create_directories(cache);
  // Says "deleted" each time it found something to delete.
  testing::Background deleter({"/bin/sh", "-c",
                               "while :; do if [ -n \"$(ls -A \"$0\" 2>/dev/null)\" ]; then "
                               "rm -rf \"$0\"/* 2>/dev/null; echo deleted; fi; sleep 0.005; done",
                               cache});
  auto r = Train(url_, {"--cache-dir", cache, "--indices-out", dir_.Sub("deleted-idx")});
  ASSERT_TRUE(deleter.Running()) << deleter.output();
  EXPECT_TRUE(deleter.WaitFor("deleted", std::chrono::seconds(1)))
      << "nothing was deleted while the job ran";
  ExpectTrainedAsLocally(r, want, dir_.Sub("deleted-idx"), "a folder deleted under the job");
}

// Two jobs started together on one cache folder (two launchers, as two users' jobs on one node):
// each trains as it does alone, and between them the dataset is fetched from the store once —
// where their fetches overlap, the claims keep each chunk to one of them (file locks, across jobs
// as across a job's ranks); where they do not, the folder serves the later one.
TEST_F(CliS3Faults, TwoJobsSharingACacheFolderTrainAsAloneAndFetchTheDatasetOnce) {
  const std::string want = LocalChecksum();
  const std::string cache = dir_.Sub("shared");
  const auto codes = testing::RunForked(
      2,
      [&](int job) {
        const std::string name = "job" + std::to_string(job);
        auto r = Train(url_, {"--cache-dir", cache, "--indices-out", dir_.Sub(name + "-idx")});
        std::ofstream(dir_.Sub(name + ".out")) << r.out;
        std::ofstream(dir_.Sub(name + ".err")) << r.err;
        return r.exit_code;
      },
      std::chrono::seconds(240));
  uint64_t fetched = 0;
  for (int job = 0; job < 2; ++job) {
    const std::string name = "job" + std::to_string(job);
    testing::RunResult r;
    r.exit_code = codes[job];
    std::ifstream out(dir_.Sub(name + ".out")), err(dir_.Sub(name + ".err"));
    r.out.assign(std::istreambuf_iterator<char>(out), {});
    r.err.assign(std::istreambuf_iterator<char>(err), {});
    fetched += ExpectTrainedAsLocally(r, want, dir_.Sub(name + "-idx"), name)["records_fetched"]
                   .get<uint64_t>();
  }
  EXPECT_EQ(fetched, uint64_t{kRecords}) << "two jobs on one folder fetched a record twice";
}

#ifdef DDPIO_TORCH_PYTHON
// Under torchrun's elastic agent, the node's ranks sharing a cache folder: local rank 1 (which
// fetches chunks for the node as much as rank 0) is killed with SIGKILL once the first checkpoint
// exists. Its claims die with it; rank 0 fails on the lost peer; the agent restarts both, which
// resume the block order from the checkpoint and end with exactly the parameters of an
// uninterrupted run, every sample once an epoch over both attempts.
TEST_F(CliS3Faults, AKilledRankUnderTorchrunResumesTheBlockOrderFromTheStoreExactly) {
  const std::string killer = dir_.Sub("kill-rank-1-once.sh");
  testing::WriteKillRankOneOnceScript(killer);
  auto torchrun = [&](const std::string& name, bool kill) {
    const std::string checkpoints = dir_.Sub(name);
    const auto args = testing::TorchrunElastic(
        DDPIO_TORCH_PYTHON, 2, kill ? killer : "",
        TrainArgs(url_, {"--checkpoint-every", "3", "--resume", "--checkpoint-dir", checkpoints,
                         "--indices-out", checkpoints + "/indices", "--cache-dir",
                         dir_.Sub(name + "-cache")}));
    testing::RunOptions o;
    o.timeout = std::chrono::seconds(240);
    o.env = {{"DDPIO_STORE_TOKEN", "elastic-s3-test"},
             {"KILL_AFTER", checkpoints + "/checkpoint.bin"}};
    return testing::Run(args, o);
  };
  testing::ExpectResumedToTheStraightRun(torchrun("straight", false), torchrun("killed", true), 2);
  const nlohmann::json tally =
      testing::TallyIndices(dir_.Sub("killed") + "/indices", kRecords, kEpochs);
  EXPECT_TRUE(tally["ok"]) << tally.dump();
  EXPECT_EQ(tally["attempts"].size(), 2u) << tally.dump();
}
#endif  // DDPIO_TORCH_PYTHON

}  // namespace
}  // namespace ddpio
