// `ddpio train` on a token dataset under `ddpio launch`: real rank processes, Gloo over loopback,
// a dataset converted from a flat token file. The data is a Markov chain — each id mostly
// determines the next — so a next-token model that uses its context must end well below the
// unigram entropy of the data, which a model without context cannot beat. Checked: the loss falls
// below that entropy on every rank alike (DDP), a group's leader reads for its peer, a stopped job
// resumes to the straight run's parameters with every sequence trained once, and the mistakes a
// user makes (no --seq-len, --seq-len on images, --val) fail at once naming the setting.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/rank_lines.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

using testing::RankLines;
using testing::RunDdpio;

constexpr int kVocab = 48;  // ids 0 .. 46, and 47 the end of a document
constexpr int kEos = kVocab - 1;

class CliTrainTokens : public ::testing::Test {
 protected:
  // `documents` documents of 20 to 80 ids in which id i is followed by (mul i + add) mod 47 nine
  // times in ten, converted to NAME.db; returns the ids written.
  static uint64_t Chain(const std::string& name, int documents, int mul, int add, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint16_t> ids;
    for (int d = 0; d < documents; ++d) {
      uint16_t id = static_cast<uint16_t>(rng() % kEos);
      const int n = 20 + static_cast<int>(rng() % 61);
      for (int i = 0; i < n; ++i) {
        ids.push_back(id);
        id = rng() % 10 != 0 ? static_cast<uint16_t>((mul * id + add) % kEos)
                             : static_cast<uint16_t>(rng() % kEos);
      }
      ids.push_back(kEos);
    }
    std::ofstream(dir_->Sub(name + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(ids.data()),
               static_cast<std::streamsize>(ids.size() * sizeof(uint16_t)));
    EXPECT_EQ(RunDdpio({"convert", "--from", "tokens", "--src", dir_->Sub(name + ".bin"), "--dtype",
                        "uint16", "--eos", std::to_string(kEos), "--out", dir_->Sub(name + ".db"),
                        "--quiet"})
                  .exit_code,
              0);
    return ids.size();
  }

  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    tokens_ = Chain("tok", 160, 5, 3, 7);
    other_sequences_ = (Chain("other", 60, 7, 1, 8) - 1) / kSeqLen;  // another, for a mixture
    // 3 ids: no sequence of 17.
    const uint16_t few[] = {1, 2, kEos};
    std::ofstream(dir_->Sub("few.bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(few), sizeof(few));
    ASSERT_EQ(RunDdpio({"convert", "--from", "tokens", "--src", dir_->Sub("few.bin"), "--dtype",
                        "uint16", "--out", dir_->Sub("few.db"), "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(RunDdpio({"synth", "--out", dir_->Sub("img"), "--classes", "2", "--per-class", "3",
                        "--size", "16", "--quiet"})
                  .exit_code,
              0);
    ASSERT_EQ(
        RunDdpio({"convert", "--src", dir_->Sub("img"), "--out", dir_->Sub("img.db"), "--quiet"})
            .exit_code,
        0);
  }
  static void TearDownTestSuite() { delete dir_; }

  // Sequences of kSeqLen ids: (T - 1) / kSeqLen of the T ids.
  static constexpr int kSeqLen = 16;
  static int Sequences() { return static_cast<int>((tokens_ - 1) / kSeqLen); }

  static testing::RunResult Train(int ranks, std::vector<std::string> extra, int seq_len = kSeqLen,
                                  std::string data = "") {
    if (data.empty()) data = dir_->Sub("tok.db");
    std::vector<std::string> args = {"launch",
                                     "--nproc-per-node",
                                     std::to_string(ranks),
                                     "--",
                                     testing::DdpioBin(),
                                     "train",
                                     "--data",
                                     data,
                                     "--seq-len",
                                     std::to_string(seq_len),
                                     "--batch-size",
                                     "8",
                                     "--hidden",
                                     "48",
                                     "--lr",
                                     "0.5",
                                     "--workers",
                                     "1",
                                     "--progress-every",
                                     "0",
                                     "--timeout",
                                     "60",
                                     "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunDdpio(args);
  }

  static testing::TempDir* dir_;
  static uint64_t tokens_;
  static int other_sequences_;
};
testing::TempDir* CliTrainTokens::dir_ = nullptr;
uint64_t CliTrainTokens::tokens_ = 0;
int CliTrainTokens::other_sequences_ = 0;

TEST_F(CliTrainTokens, TheLossFallsBelowTheUnigramEntropyOnEveryRankAlike) {
  // Groups of 2: rank 0 reads the sequences for both ranks; each trains on its own share.
  auto run = Train(2, {"--epochs", "4", "--group-size", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto lines = RankLines(run.out);
  ASSERT_EQ(lines.size(), 2u) << run.out;
  for (const auto& [rank, j] : lines) {
    ASSERT_TRUE(j.contains("tokens")) << j.dump();
    EXPECT_EQ(j["tokens"]["vocabulary"], kVocab) << "the largest id + 1: no vocabulary recorded";
    EXPECT_EQ(j["tokens"]["seq_len"], kSeqLen);
    const double entropy = j["tokens"]["unigram_entropy"];
    // 47 ids nearly uniform, and the EOS: close to ln 48.
    EXPECT_GT(entropy, 3.5);
    EXPECT_LT(entropy, std::log(kVocab) + 1e-9);
    // The chain's own entropy is about 0.1 ln 47 + 0.33 = 0.72 nats: a model that uses its context
    // gets far below the unigram entropy; one that does not, cannot get below it at all.
    EXPECT_LT(j["train_loss"].get<double>(), 0.6 * entropy) << j.dump();
    EXPECT_EQ(j["param_checksum"], lines[0]["param_checksum"]) << "rank " << rank;
    // 4 epochs of ceil(S / 2 ranks / 8) steps.
    EXPECT_EQ(j["steps"], 4 * ((Sequences() + 15) / 16));
  }
  EXPECT_GT(lines[0]["records_read"].get<uint64_t>(), 0u);
  EXPECT_EQ(lines[1]["records_read"], 0) << "the group's peer reads nothing: its leader feeds it";
  EXPECT_GT(lines[1]["bytes_received"].get<uint64_t>(), 0u);
}

// A tensor-parallel group: both ranks train on the group's identical batches (replicate), sent
// ready-made by the leader (the decoded payload: uint32 ids), or as records the peer unpacks.
TEST_F(CliTrainTokens, AReplicatedGroupTrainsOnItsLeadersBatchesDecodedOrEncoded) {
  std::string checksum;
  for (const char* payload : {"decoded", "encoded"}) {
    const std::string indices = dir_->Sub(absl::StrCat("replicate-", payload));
    auto run = Train(2, {"--epochs", "1", "--group-size", "2", "--mode", "replicate", "--payload",
                         payload, "--indices-out", indices});
    ASSERT_EQ(run.exit_code, 0) << payload << ": " << run.err;
    auto lines = RankLines(run.out);
    ASSERT_EQ(lines.size(), 2u) << run.out;
    EXPECT_EQ(lines[1]["records_read"], 0) << payload;
    EXPECT_EQ(lines[0]["param_checksum"], lines[1]["param_checksum"]) << payload;
    // Identical batches: the same loss on both, and the same indices, step by step.
    EXPECT_EQ(lines[0]["train_loss"], lines[1]["train_loss"]) << payload;
    // Each log's step lines ("step TIME epoch E step S N INDICES..."), without their times.
    const auto steps = [](const std::string& path) {
      std::ifstream in(path);
      std::vector<std::string> out;
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("step ", 0) != 0) continue;
        out.push_back(line.substr(line.find(' ', 5)));
      }
      return out;
    };
    const std::vector<std::string> a = steps(indices + ".rank0.txt");
    ASSERT_GT(a.size(), 10u);
    EXPECT_EQ(a, steps(indices + ".rank1.txt")) << payload;
    // The same data and order whatever travels.
    if (checksum.empty()) checksum = lines[0]["param_checksum"];
    EXPECT_EQ(lines[0]["param_checksum"], checksum) << payload;
  }
}

// The program's weighted mixture: the sum of both datasets' sequences, drawn by weight.
TEST_F(CliTrainTokens, AWeightedMixtureOfTwoDatasetsTrains) {
  const std::string data = dir_->Sub("tok.db") + ":0.3," + dir_->Sub("other.db") + ":0.7";
  auto run = Train(2, {"--epochs", "2", "--group-size", "2"}, kSeqLen, data);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto lines = RankLines(run.out);
  ASSERT_EQ(lines.size(), 2u) << run.out;
  EXPECT_EQ(lines[0]["param_checksum"], lines[1]["param_checksum"]);
  EXPECT_LT(lines[0]["train_loss"].get<double>(),
            0.6 * lines[0]["tokens"]["unigram_entropy"].get<double>());
  // Each rank says how many sequences of each source it trained on: 0.3 and 0.7 of them.
  uint64_t from[2] = {0, 0};
  for (const auto& [rank, j] : lines) {
    ASSERT_EQ(j["tokens"]["sequences_per_source"].size(), 2u) << j.dump();
    for (int s = 0; s < 2; ++s) from[s] += j["tokens"]["sequences_per_source"][s].get<uint64_t>();
  }
  const double all = static_cast<double>(from[0] + from[1]);
  // 2 epochs of both (torch's padding may repeat a sequence an epoch to even out the ranks).
  EXPECT_NEAR(all, 2.0 * (Sequences() + other_sequences_), 2.0);
  EXPECT_NEAR(from[1] / all, 0.7, 0.01);
  // Other weights are another dataset to a checkpoint; a bad weight is refused by name.
  auto bad = Train(1, {"--epochs", "1"}, kSeqLen,
                   dir_->Sub("tok.db") + ":0.3," + dir_->Sub("other.db") + ":nan");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("weight"), std::string::npos) << bad.err;
}

TEST_F(CliTrainTokens, StopAndResumeGivesTheStraightRunsParametersAndEverySequenceOnce) {
  auto straight = Train(2, {"--epochs", "2"});
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const int per_epoch = (Sequences() + 15) / 16;
  const std::string ckpt = dir_->Sub("ckpt"), indices = dir_->Sub("indices");
  auto first = Train(2, {"--epochs", "2", "--checkpoint-dir", ckpt, "--stop-after-steps",
                         std::to_string(per_epoch + 3), "--indices-out", indices});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto resumed =
      Train(2, {"--epochs", "2", "--checkpoint-dir", ckpt, "--resume", "--indices-out", indices});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from"), std::string::npos) << resumed.err;
  auto a = RankLines(straight.out), b = RankLines(resumed.out);
  ASSERT_EQ(b.size(), 2u) << resumed.out;
  EXPECT_EQ(b[0]["steps"], per_epoch - 3);
  EXPECT_EQ(b[0]["param_checksum"], a[0]["param_checksum"]);
  EXPECT_EQ(b[1]["param_checksum"], a[0]["param_checksum"]);
  const nlohmann::json tally = testing::TallyIndices(indices, Sequences(), 2);
  EXPECT_TRUE(tally["ok"]) << tally.dump();
  EXPECT_EQ(tally["attempts"].size(), 2u) << tally.dump();
  // Another sequence length makes other sequences: resuming with it is refused.
  auto other = Train(2, {"--epochs", "2", "--checkpoint-dir", ckpt, "--resume"}, 15);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("checkpoint"), std::string::npos) << other.err << other.out;
}

TEST_F(CliTrainTokens, MistakesFailAtOnceNamingTheSetting) {
  auto none = RunDdpio({"train", "--data", dir_->Sub("tok.db"), "--timeout", "20"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("is a token dataset"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("--seq-len"), std::string::npos) << none.err;
  auto images =
      RunDdpio({"train", "--data", dir_->Sub("img.db"), "--seq-len", "16", "--timeout", "20"});
  EXPECT_NE(images.exit_code, 0);
  EXPECT_NE(images.err.find("is an image dataset"), std::string::npos) << images.err;
  auto val = RunDdpio({"train", "--data", dir_->Sub("tok.db"), "--seq-len", "16", "--val",
                       dir_->Sub("tok.db"), "--timeout", "20"});
  EXPECT_NE(val.exit_code, 0);
  EXPECT_NE(val.err.find("--val"), std::string::npos) << val.err;
  auto few =
      RunDdpio({"train", "--data", dir_->Sub("few.db"), "--seq-len", "16", "--timeout", "20"});
  EXPECT_NE(few.exit_code, 0);
  EXPECT_NE(few.err.find("too few for one sequence"), std::string::npos) << few.err;
  EXPECT_NE(few.err.find("seq_len 16"), std::string::npos) << few.err;
  auto wide = RunDdpio({"train", "--data", dir_->Sub("tok.db"), "--seq-len", "16", "--hidden",
                        "8,70000,70000", "--timeout", "20"});
  EXPECT_NE(wide.exit_code, 0);
  EXPECT_NE(wide.err.find("more than 2^28"), std::string::npos) << wide.err;
}

}  // namespace
}  // namespace ddpio
