// `ddpio train` under `ddpio launch`, as users run it: real rank processes, Gloo over loopback,
// converted synth datasets. The trainer's numerics are tested in trainer/trainer_test.cc; these
// tests check what the command promises: every rank ends with the same parameters and the same
// validation accuracy over every validation sample once, only leaders read, the model learns,
// a stopped job resumes to the same parameters, and bad arguments fail fast and clearly.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"
#include "tests/support/rank_lines.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/torchrun.h"

namespace ddpio {
namespace {

using testing::RankLines;
using testing::RunDdpio;

class CliTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    // 3 classes: 120 training samples, 21 validation samples (4 ranks do not divide 21).
    ASSERT_EQ(RunDdpio({"synth", "--out", dir_->Sub("train"), "--classes", "3", "--per-class", "40",
                        "--size", "40", "--seed", "1", "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(RunDdpio({"synth", "--out", dir_->Sub("val"), "--classes", "3", "--per-class", "7",
                        "--size", "40", "--seed", "2", "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(RunDdpio({"convert", "--src", dir_->Sub("train"), "--out", dir_->Sub("train.db"),
                        "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(
        RunDdpio({"convert", "--src", dir_->Sub("val"), "--out", dir_->Sub("val.db"), "--quiet"})
            .exit_code,
        0);
  }
  static void TearDownTestSuite() { delete dir_; }

  // The tally of the `--indices-out PREFIX` logs of a run of `epochs` epochs on the suite's 120
  // training samples.
  static nlohmann::json Tally(const std::string& prefix, int epochs) {
    return testing::TallyIndices(prefix, 120, epochs);
  }

  static testing::RunResult Train(int ranks, std::vector<std::string> extra) {
    std::vector<std::string> args = {"launch", "--nproc-per-node", std::to_string(ranks), "--"};
    for (std::string& a : TrainArgs(std::move(extra))) args.push_back(std::move(a));
    return RunDdpio(args);
  }
  // `ddpio train` with the suite's data and model, then `extra`.
  static std::vector<std::string> TrainArgs(std::vector<std::string> extra) {
    std::vector<std::string> args = {testing::DdpioBin(),
                                     "train",
                                     "--data",
                                     dir_->Sub("train.db"),
                                     "--val",
                                     dir_->Sub("val.db"),
                                     "--batch-size",
                                     "8",
                                     "--image-size",
                                     "16",
                                     "--hidden",
                                     "32",
                                     "--workers",
                                     "1",
                                     "--progress-every",
                                     "5",
                                     "--timeout",
                                     "30",
                                     "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  static testing::TempDir* dir_;
};
testing::TempDir* CliTrain::dir_ = nullptr;

TEST_F(CliTrain, FourRanksInTwoGroupsAgreeLearnAndOnlyLeadersRead) {
  auto r = Train(4, {"--epochs", "6", "--group-size", "2", "--lr", "0.02"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = RankLines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (int rank = 0; rank < 4; ++rank) {
    const auto& j = lines[rank];
    EXPECT_EQ(j["param_checksum"], lines[0]["param_checksum"]) << "rank " << rank;
    EXPECT_EQ(j["val_samples"], 21) << "rank " << rank;  // every validation sample once
    EXPECT_EQ(j["val_accuracy"], lines[0]["val_accuracy"]) << "rank " << rank;
    EXPECT_EQ(j["steps"], 6 * 4) << "rank "
                                 << rank;  // 120 / 4 ranks / batch 8 = 3.75 -> 4 per epoch
    const bool leader = rank % 2 == 0;     // contiguous groups [0, 1] and [2, 3]
    EXPECT_EQ(j["records_read"].get<uint64_t>() > 0, leader) << "rank " << rank;
    EXPECT_EQ(j["bytes_received"].get<uint64_t>() > 0, !leader) << "rank " << rank;
    EXPECT_GE(j["stall_fraction"].get<double>(), 0.0);
    EXPECT_LE(j["stall_fraction"].get<double>(), 1.0);
    EXPECT_NE(j["path"].get<std::string>().find("cpu: OpenBLAS"), std::string::npos) << j["path"];
  }
  // 3 classes: chance is 1/3. The synth classes (shape + colour) are easy; a learning model gets
  // well above chance in a few epochs, a broken one (no gradient, wrong labels) stays near it.
  EXPECT_GE(lines[0]["val_accuracy"].get<double>(), 0.7) << r.err;
  EXPECT_NE(r.err.find("validation accuracy"), std::string::npos) << r.err;  // rank 0's progress
  EXPECT_NE(r.err.find("samples/s  stall"), std::string::npos) << r.err;
}

// The straggler report: gathered every 2 steps and at the epoch's end, logged by rank 0, in every
// rank's --json (every rank, every stage; the training thread's stages are the whole step) and
// written by rank 0 as Prometheus text that Debian's promtool accepts. Over a whole epoch (the
// default: one report at its end) the leaders' storage reads and every rank's decoding show; in a
// short interval late in an epoch they may not (the loader decoded those batches ahead).
TEST_F(CliTrain, TheStepReportCoversEveryRankAndStageAndIsValidPrometheusText) {
  const std::string metrics = dir_->Sub("steps.prom");
  for (const std::string every : {"2", "0"}) {
    auto r = Train(4, {"--epochs", "1", "--group-size", "2", "--report-every", every,
                       "--metrics-file", metrics});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto lines = RankLines(r.out);
    ASSERT_EQ(lines.size(), 4u) << r.out;
    const uint64_t steps = every == "2" ? 2 : 4;  // the last report's: steps 2-4, or 0-4
    for (int rank = 0; rank < 4; ++rank) {
      const auto& report = lines[rank]["step_report"];
      ASSERT_TRUE(report.is_object()) << lines[rank];
      EXPECT_EQ(report["line"], lines[0]["step_report"]["line"]);  // the same reading everywhere
      EXPECT_EQ(report["first_step"], 4 - steps);
      EXPECT_EQ(report["last_step"], 4);
      ASSERT_EQ(report["ranks"].size(), 4u);
      for (int k = 0; k < 4; ++k) {
        const auto& rk = report["ranks"][k];
        EXPECT_EQ(rk["rank"], k);
        EXPECT_EQ(rk["fed_by"], k % 2 == 0 ? -1 : k - 1) << "contiguous groups [0, 1], [2, 3]";
        EXPECT_EQ(rk["steps"], steps);
        double on_thread = 0;
        for (const char* stage : {"wait", "compute", "allreduce"})
          on_thread += rk["stages"][stage]["share"].get<double>();
        EXPECT_NEAR(on_thread, 1.0, 1e-6) << rk;
        for (const char* stage : {"read", "decode", "relay"}) {
          EXPECT_GE(rk["stages"][stage]["p99_ms"].get<double>(),
                    rk["stages"][stage]["p50_ms"].get<double>())
              << rk;
        }
        if (every == "0") {
          EXPECT_EQ(rk["stages"]["read"]["share"].get<double>() > 0, k % 2 == 0) << rk;
          EXPECT_GT(rk["stages"]["decode"]["share"].get<double>(), 0) << rk;
        }
      }
    }
    // Rank 0 logged a report at steps 2 and 4 (the epoch's end falls on the second), or once.
    size_t reports = 0;
    for (size_t at = r.err.find("step report, epoch 0"); at != std::string::npos;
         at = r.err.find("step report, epoch 0", at + 1))
      ++reports;
    EXPECT_EQ(reports, every == "2" ? 2u : 1u) << r.err;
    std::ifstream in(metrics);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("ddpio_straggler_rank "), std::string::npos) << text.str();
    testing::RunOptions o;
    o.stdin_data = text.str();
    auto check = testing::Run({"/usr/bin/promtool", "check", "metrics"}, o);
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  }
  // A metrics file that cannot be written is a warning; the training goes on.
  auto unwritable =
      Train(2, {"--epochs", "1", "--metrics-file", dir_->Sub("no-such-folder/steps.prom")});
  EXPECT_EQ(unwritable.exit_code, 0) << unwritable.err;
  EXPECT_NE(unwritable.err.find("the step report's metrics file was not written"),
            std::string::npos)
      << unwritable.err;
}

#ifdef DDPIO_TORCH_PYTHON
// Under torchrun's elastic agent (rendezvous backend c10d, --max_restarts 1), as users run elastic
// jobs: a rank killed with SIGKILL mid-epoch, once the first checkpoint exists; the agent restarts
// the workers, which resume from the checkpoint (redoing the steps since) and end with exactly
// the parameters of an uninterrupted run.
TEST_F(CliTrain, UnderTorchrunElasticAKilledRankIsRestartedAndResumesExactly) {
  const std::string killer = dir_->Sub("kill-rank-1-once.sh");
  testing::WriteKillRankOneOnceScript(killer);
  const std::vector<std::string> run = {"--epochs", "3", "--checkpoint-every", "4", "--resume"};
  auto torchrun = [&](const std::string& checkpoints, bool kill) {
    std::vector<std::string> train = run;
    train.insert(train.end(),
                 {"--checkpoint-dir", checkpoints, "--indices-out", checkpoints + "/indices"});
    const auto args =
        testing::TorchrunElastic(DDPIO_TORCH_PYTHON, 2, kill ? killer : "", TrainArgs(train));
    testing::RunOptions o;
    o.timeout = std::chrono::seconds(240);
    o.env = {{"DDPIO_STORE_TOKEN", "elastic-test"},
             {"KILL_AFTER", checkpoints + "/checkpoint.bin"}};
    return testing::Run(args, o);
  };
  const auto [want, got] = testing::ExpectResumedToTheStraightRun(
      torchrun(dir_->Sub("ck-straight"), false), torchrun(dir_->Sub("ck-killed"), true), 2);
  for (const auto& [rank, line] : got) {
    EXPECT_EQ(line["val_accuracy"], want.at(rank)["val_accuracy"]) << "rank " << rank;
  }
  // Over both attempts, counting only the steps the checkpoint kept: every sample once an epoch.
  const nlohmann::json tally = Tally(dir_->Sub("ck-killed") + "/indices", 3);
  EXPECT_TRUE(tally["ok"]) << tally.dump();
  EXPECT_EQ(tally["attempts"].size(), 2u) << tally.dump();
}
#endif  // DDPIO_TORCH_PYTHON

TEST_F(CliTrain, StopAndResumeGivesTheStraightRunsParameters) {
  auto straight = Train(2, {"--epochs", "2"});
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const std::string ckpt = dir_->Sub("ckpt");
  // 120 / 2 ranks / batch 8 = 8 steps per epoch: stop in the middle of the second epoch.
  const std::string indices = dir_->Sub("stop-resume-indices");
  auto first = Train(2, {"--epochs", "2", "--checkpoint-dir", ckpt, "--stop-after-steps", "11",
                         "--indices-out", indices});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(RankLines(first.out)[0]["steps"], 11);
  auto resumed =
      Train(2, {"--epochs", "2", "--checkpoint-dir", ckpt, "--resume", "--indices-out", indices});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  // What was trained, step by step: every sample of both epochs exactly once over the two jobs.
  const nlohmann::json tally = Tally(indices, 2);
  EXPECT_TRUE(tally["ok"]) << tally.dump();
  EXPECT_EQ(tally["attempts"].size(), 2u) << tally.dump();
  EXPECT_EQ(tally["redone_steps"], 0) << "stopped right after a checkpoint: nothing to redo";
  EXPECT_NE(resumed.err.find("resuming from"), std::string::npos) << resumed.err;
  auto a = RankLines(straight.out), b = RankLines(resumed.out);
  ASSERT_EQ(b.size(), 2u) << resumed.out;
  EXPECT_EQ(b[0]["steps"], 5);
  EXPECT_EQ(b[0]["param_checksum"], a[0]["param_checksum"]);
  EXPECT_EQ(b[1]["param_checksum"], a[0]["param_checksum"]);
  EXPECT_EQ(b[0]["val_accuracy"], a[0]["val_accuracy"]);
  // Another seed would give another permutation: resuming with it is refused, not silently wrong.
  auto reseeded = Train(2, {"--epochs", "3", "--checkpoint-dir", ckpt, "--resume", "--seed", "9"});
  EXPECT_EQ(reseeded.exit_code, 1);
  EXPECT_NE(reseeded.err.find("sampler seed 0"), std::string::npos) << reseeded.err;
}

// The block order: every sample once an epoch; a job stopped on 2 ranks resumes on 3 from its
// checkpoint, keeping the 2 lanes the epoch was dealt to, and still trains every sample once; a
// job in the exact order refuses that checkpoint.
TEST_F(CliTrain, TheBlockOrderResumesOnAnotherWorldSizeKeepingItsLanesAndEverySampleOnce) {
  const std::string ckpt = dir_->Sub("ckpt-block");
  const std::string indices = dir_->Sub("block-indices");
  const auto block = [](std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--order", "block", "--block-chunk", "8", "--block-window", "2"});
    return extra;
  };
  auto first = Train(2, block({"--epochs", "2", "--checkpoint-dir", ckpt, "--stop-after-steps",
                               "11", "--indices-out", indices}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto resumed = Train(
      3, block({"--epochs", "2", "--checkpoint-dir", ckpt, "--resume", "--indices-out", indices}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const nlohmann::json tally = Tally(indices, 2);
  EXPECT_TRUE(tally["ok"]) << tally.dump();
  EXPECT_EQ(tally["attempts"].size(), 2u) << tally.dump();
  auto exact = Train(2, {"--epochs", "2", "--checkpoint-dir", ckpt, "--resume"});
  EXPECT_EQ(exact.exit_code, 1);
  EXPECT_NE(exact.err.find("counts its position in the block order (8 records a chunk, a window "
                           "of 2 chunks, 2 lanes)"),
            std::string::npos)
      << exact.err;
}

// `ddpio checkpoint` (the first-GPU checklist's comparison): the same run twice agrees bit for
// bit; another seed is beyond the tolerance; another point of training is not comparable; the
// checksum it prints is the one train printed; a missing checkpoint is a clear error.
TEST_F(CliTrain, CheckpointComparesTwoRunsParameters) {
  const std::string a = dir_->Sub("cmp-a"), b = dir_->Sub("cmp-b"), c = dir_->Sub("cmp-c"),
                    d = dir_->Sub("cmp-d");
  auto run_a = Train(2, {"--epochs", "1", "--checkpoint-dir", a, "--stop-after-steps", "2"});
  ASSERT_EQ(run_a.exit_code, 0) << run_a.err;
  ASSERT_EQ(Train(2, {"--epochs", "1", "--checkpoint-dir", b, "--stop-after-steps", "2"}).exit_code,
            0);
  ASSERT_EQ(Train(2, {"--epochs", "1", "--checkpoint-dir", c, "--stop-after-steps", "3"}).exit_code,
            0);
  ASSERT_EQ(
      Train(2, {"--epochs", "1", "--checkpoint-dir", d, "--stop-after-steps", "2", "--seed", "9"})
          .exit_code,
      0);

  auto alone = RunDdpio({"checkpoint", a, "--json"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  const auto info = nlohmann::json::parse(alone.out);
  EXPECT_EQ(info["step"], 2);
  EXPECT_EQ(info["param_checksum"], RankLines(run_a.out)[0]["param_checksum"]);

  auto same = RunDdpio({"checkpoint", a, "--compare", b});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("(bit for bit the same)"), std::string::npos) << same.out;

  auto reseeded = RunDdpio({"checkpoint", a, "--compare", d, "--json"});
  EXPECT_EQ(reseeded.exit_code, 1) << reseeded.out << reseeded.err;
  const auto r = nlohmann::json::parse(reseeded.out);
  EXPECT_TRUE(r["same_point"].get<bool>());
  EXPECT_GT(r["differing"].get<uint64_t>(), 0u);
  EXPECT_GT(r["max_relative"].get<double>(), 1e-5);
  EXPECT_FALSE(r["within"].get<bool>());
  // The same difference passes a tolerance above it.
  const std::string loose = std::to_string(r["max_relative"].get<double>() * 2);
  EXPECT_EQ(RunDdpio({"checkpoint", a, "--compare", d, "--tolerance", loose}).exit_code, 0);

  auto later = RunDdpio({"checkpoint", a, "--compare", c});
  EXPECT_EQ(later.exit_code, 1);
  EXPECT_NE(later.out.find("not the same point of training"), std::string::npos) << later.out;

  auto missing = RunDdpio({"checkpoint", dir_->Sub("no-such-ckpt")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("ddpio checkpoint: error: no checkpoint at"), std::string::npos)
      << missing.err;
  EXPECT_EQ(RunDdpio({"checkpoint"}).exit_code, 2);  // usage: the directory is required
}

// Without a launcher the command is one rank: no token, no port to set.
TEST_F(CliTrain, AloneItIsOneRank) {
  auto r = RunDdpio({"train", "--data", dir_->Sub("train.db"), "--epochs", "1", "--batch-size",
                     "16", "--image-size", "16", "--hidden", "8", "--workers", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(testing::LastLine(r.out));
  EXPECT_EQ(j["world"], 1);
  EXPECT_EQ(j["steps"], 8);  // 120 samples / 16, the last batch short
  EXPECT_EQ(j["records_read"], 120);
}

TEST_F(CliTrain, BadArgumentsFailFastAndSayWhat) {
  auto missing = RunDdpio({"train", "--data", dir_->Sub("no-such.db"), "--quiet-not-a-flag"});
  EXPECT_EQ(missing.exit_code, 2);  // unknown flag: usage
  auto no_data = RunDdpio({"train", "--data", dir_->Sub("no-such.db")});
  EXPECT_EQ(no_data.exit_code, 1);
  EXPECT_NE(no_data.err.find("no-such.db"), std::string::npos) << no_data.err;
  // Under launch: every rank fails before the rendezvous, nothing waits for a timeout.
  auto launched = Train(2, {"--group-size", "3"});
  EXPECT_NE(launched.exit_code, 0);
  EXPECT_FALSE(launched.timed_out);
  EXPECT_NE(launched.err.find("group"), std::string::npos) << launched.err;
  auto resume = RunDdpio({"train", "--data", dir_->Sub("train.db"), "--resume"});
  EXPECT_EQ(resume.exit_code, 2);
  EXPECT_NE(resume.err.find("--checkpoint-dir"), std::string::npos) << resume.err;
  auto hidden = RunDdpio({"train", "--data", dir_->Sub("train.db"), "--hidden", "32,x"});
  EXPECT_EQ(hidden.exit_code, 2);
}

// These machines have no GPU: --device cuda (the model on the device, gradients over NCCL) is
// refused by every rank before any connection, with the CUDA error and what to use instead.
TEST_F(CliTrain, DeviceCudaWithoutADeviceFailsOnEveryRankAtOnce) {
  auto info = RunDdpio({"info"});
  ASSERT_EQ(info.exit_code, 0);
  if (info.out.find("GPU path") != std::string::npos)
    GTEST_SKIP() << "this machine has a CUDA device";
  auto r = Train(2, {"--device", "cuda", "--payload", "decoded"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.timed_out);
  // The reason: no usable device, or (a build without CUDA) no NCCL at all; and what to use.
  EXPECT_NE(r.err.find("] ddpio train: error: backend nccl"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use the gloo"), std::string::npos) << r.err;
  auto backend = Train(2, {"--backend", "nccl"});  // the same, asked for by backend
  EXPECT_NE(backend.exit_code, 0);
  EXPECT_FALSE(backend.timed_out);
  EXPECT_NE(backend.err.find("] ddpio train: error: backend nccl"), std::string::npos)
      << backend.err;
  // Every rank decides alone, before any connection: rank 1 of 2 started without a rank 0 (launch
  // stops the other ranks once one fails, so only a rank on its own shows that it does not wait).
  testing::RunOptions solo;
  solo.env = {{"RANK", "1"},
              {"WORLD_SIZE", "2"},
              {"LOCAL_RANK", "1"},
              {"LOCAL_WORLD_SIZE", "2"},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", "1"}};
  const auto t0 = std::chrono::steady_clock::now();
  auto alone = RunDdpio(
      {"train", "--data", dir_->Sub("train.db"), "--backend", "nccl", "--timeout", "60"}, solo);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));  // not the timeout
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.err.find("ddpio train: error: backend nccl"), std::string::npos) << alone.err;
  auto bad = RunDdpio({"train", "--data", dir_->Sub("train.db"), "--device", "tpu"});
  EXPECT_EQ(bad.exit_code, 2);  // usage: cpu or cuda
}

// A validation set whose labels mean other classes is refused before training, naming the first
// difference: an accuracy over mismatched labels would be silently meaningless.
TEST_F(CliTrain, AValidationSetWithOtherClassesIsRefused) {
  ASSERT_EQ(RunDdpio({"synth", "--out", dir_->Sub("val4"), "--classes", "4", "--per-class", "2",
                      "--size", "40", "--quiet"})
                .exit_code,
            0);
  ASSERT_EQ(
      RunDdpio({"convert", "--src", dir_->Sub("val4"), "--out", dir_->Sub("val4.db"), "--quiet"})
          .exit_code,
      0);
  auto r = RunDdpio({"train", "--data", dir_->Sub("train.db"), "--val", dir_->Sub("val4.db"),
                     "--epochs", "1", "--image-size", "16", "--hidden", "8", "--workers", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("4 classes and the training set 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("class_003"), std::string::npos) << r.err;
}

// --bad-samples: fail names the record's index, key and source file; skip trains on, counting
// and listing what it skipped.
TEST_F(CliTrain, BadSamplesFailNamingTheSourceOrAreSkippedAndListed) {
  ASSERT_EQ(RunDdpio({"synth", "--out", dir_->Sub("bad"), "--classes", "2", "--per-class", "8",
                      "--size", "40", "--quiet"})
                .exit_code,
            0);
  const std::string victim = dir_->Sub("bad/class_001/img_00002.jpg");
  // Header intact, the last third of the entropy data cut: fast mode decodes only down to its
  // crop's last row, so the cut must be high enough for this seed's crop to reach it (it is).
  std::filesystem::resize_file(victim, std::filesystem::file_size(victim) * 2 / 3);
  ASSERT_EQ(RunDdpio({"convert", "--src", dir_->Sub("bad"), "--out", dir_->Sub("bad.db"),
                      "--header-only", "--quiet"})
                .exit_code,
            0);
  const std::vector<std::string> args = {"train",
                                         "--data",
                                         dir_->Sub("bad.db"),
                                         "--epochs",
                                         "1",
                                         "--batch-size",
                                         "4",
                                         "--image-size",
                                         "16",
                                         "--hidden",
                                         "8",
                                         "--workers",
                                         "1",
                                         "--json"};
  auto fail = RunDdpio(args);
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_NE(fail.err.find("sample 10 (key 000000000000000a, source 'class_001/img_00002.jpg')"),
            std::string::npos)
      << fail.err;
  std::vector<std::string> skip_args = args;
  skip_args.insert(skip_args.end(), {"--bad-samples", "skip"});
  auto skip = RunDdpio(skip_args);
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  const auto j = nlohmann::json::parse(testing::LastLine(skip.out));
  EXPECT_EQ(j["bad_samples"], 1);
  ASSERT_EQ(j["skipped"].size(), 1u);
  EXPECT_EQ(j["skipped"][0]["index"], 10);
  EXPECT_NE(j["skipped"][0]["reason"].get<std::string>().find("class_001/img_00002.jpg"),
            std::string::npos);
}

}  // namespace
}  // namespace ddpio
