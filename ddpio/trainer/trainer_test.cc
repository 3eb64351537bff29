// The trainer with real rank processes over Gloo on loopback: DDP equals single-process training
// on the same samples, every rank ends with the same parameters, resume (also on another world
// size) continues exactly, and evaluation counts every validation sample once.
#include "ddpio/trainer/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/communicator_conformance.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_runs.h"

namespace ddpio::trainer {
namespace {

using ddpio::testing::RankOut;
using ddpio::testing::RelativeDifference;
using ddpio::testing::TrainJob;

TrainOptions Base(const std::string& data, uint64_t global_batch, int world) {
  TrainOptions o;
  o.pipeline.data = data;
  o.epochs = 2;
  o.pipeline.batch_size = global_batch / world;
  o.pipeline.image_size = 8;
  o.pipeline.workers = 1;
  o.pipeline.seed = 3;
  o.pipeline.augment_seed = 4;
  o.pipeline.timeout = std::chrono::seconds(30);  // also every collective
  o.hidden = {16};
  o.lr = 0.05;
  o.bucket_bytes = 256;  // one bucket per layer: several all-reduces overlapping backward
  o.progress_every = 0;
  return o;
}

void ExpectSameOnEveryRank(const std::vector<RankOut>& outs, const std::string& what) {
  for (size_t r = 1; r < outs.size(); ++r) {
    EXPECT_EQ(outs[r].checksum, outs[0].checksum)
        << what << ": rank " << r << " differs from rank 0";
  }
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.Sub("train");
    ASSERT_OK(ddpio::testing::WriteJpegDataset(data_, 48, 24));
  }
  ddpio::testing::TempDir dir_;
  std::string data_;
};

// W ranks x batch b for 2 epochs = 1 rank x batch W*b on the same samples (relative difference
// <= 1e-5), W = 2 and 4, with and without accumulating 2 micro-batches per step.
TEST_F(TrainerTest, DdpEqualsSingleProcessOnTheSameSamples) {
  for (int accumulate : {1, 2}) {
    TrainOptions single = Base(data_, 8, 1);
    single.accumulate = accumulate;
    const auto one = TrainJob(1, single, dir_.path().string(), absl::StrCat("single", accumulate));
    ASSERT_FALSE(one[0].params.empty());
    EXPECT_EQ(one[0].steps, 2u * 6 / accumulate);
    for (int world : {2, 4}) {
      TrainOptions o = Base(data_, 8, world);
      o.accumulate = accumulate;
      const auto outs =
          TrainJob(world, o, dir_.path().string(), absl::StrCat("ddp", world, "-", accumulate));
      ASSERT_FALSE(outs[0].params.empty());
      ExpectSameOnEveryRank(outs, absl::StrCat("world ", world));
      EXPECT_LE(RelativeDifference(outs[0].params, one[0].params), 1e-5)
          << "world " << world << ", accumulate " << accumulate;
    }
  }
}

// Group feeding does not change what is trained: G = 2 (shard, encoded and decoded) gives the
// parameters of G = 1; replicate groups of 2 on 4 ranks train like 2 independent readers.
TEST_F(TrainerTest, GroupFeedingTrainsTheSameModel) {
  const auto plain = TrainJob(4, Base(data_, 8, 4), dir_.path().string(), "g1");
  for (auto payload : {broadcast::FeedPayload::kEncoded, broadcast::FeedPayload::kDecoded}) {
    TrainOptions o = Base(data_, 8, 4);
    o.pipeline.group_size = 2;
    o.pipeline.payload = payload;
    const auto grouped =
        TrainJob(4, o, dir_.path().string(), "g2-" + broadcast::FeedPayloadName(payload));
    ASSERT_FALSE(grouped[0].params.empty());
    ExpectSameOnEveryRank(grouped, "grouped");
    EXPECT_EQ(grouped[0].checksum, plain[0].checksum) << broadcast::FeedPayloadName(payload);
  }
  // Replicate: both members of a group get the group's batches, so 4 ranks in 2 groups train
  // like 2 ranks each reading for itself (the sampler runs over groups).
  const auto two = TrainJob(2, Base(data_, 8, 2), dir_.path().string(), "two");
  TrainOptions o = Base(data_, 16, 4);  // batch 4 per rank, as each of the 2 ranks above
  o.pipeline.group_size = 2;
  o.pipeline.mode = broadcast::FeedMode::kReplicate;
  const auto replicated = TrainJob(4, o, dir_.path().string(), "replicate");
  ASSERT_FALSE(replicated[0].params.empty());
  ExpectSameOnEveryRank(replicated, "replicate");
  EXPECT_LE(RelativeDifference(replicated[0].params, two[0].params), 1e-5);
}

// 2 epochs straight = 1.5 epochs, stop, resume (bit for bit on the same world); stopping on 4
// ranks and resuming on 2 continues the epoch with exactly the samples not yet consumed: the
// result equals the straight run (relative difference <= 1e-5).
TEST_F(TrainerTest, ResumeContinuesExactlyAlsoOnAnotherWorldSize) {
  const auto straight = TrainJob(2, Base(data_, 8, 2), dir_.path().string(), "straight");
  ASSERT_FALSE(straight[0].params.empty());
  TrainOptions first = Base(data_, 8, 2);
  first.checkpoint_dir = dir_.Sub("ck");
  std::filesystem::create_directories(first.checkpoint_dir);
  first.stop_after_steps = 9;  // 6 steps per epoch: half way through epoch 1
  const auto stopped = TrainJob(2, first, dir_.path().string(), "stopped");
  EXPECT_EQ(stopped[0].steps, 9u);
  TrainOptions again = first;
  again.stop_after_steps = 0;
  again.resume = true;
  const auto resumed = TrainJob(2, again, dir_.path().string(), "resumed");
  ASSERT_FALSE(resumed[0].params.empty());
  EXPECT_EQ(resumed[0].steps, 3u);
  EXPECT_EQ(resumed[0].checksum, straight[0].checksum);

  TrainOptions four = Base(data_, 8, 4);
  four.checkpoint_dir = dir_.Sub("ck4");
  std::filesystem::create_directories(four.checkpoint_dir);
  four.stop_after_steps = 3;  // mid-epoch 0: 24 of 48 samples consumed
  TrainJob(4, four, dir_.path().string(), "four");
  TrainOptions two = Base(data_, 8, 2);
  two.checkpoint_dir = four.checkpoint_dir;
  two.resume = true;
  const auto elastic = TrainJob(2, two, dir_.path().string(), "elastic");
  ASSERT_FALSE(elastic[0].params.empty());
  EXPECT_EQ(elastic[0].steps, 3u + 6u);
  ExpectSameOnEveryRank(elastic, "elastic");
  EXPECT_LE(RelativeDifference(elastic[0].params, straight[0].params), 1e-5);
}

// A validation set of 21 samples on 4 ranks (not divisible): every sample is counted exactly
// once, and the accuracy equals the single-process one.
TEST_F(TrainerTest, EvaluationCountsEverySampleOnce) {
  ASSERT_OK(ddpio::testing::WriteJpegDataset(dir_.Sub("val"), 21, 24));
  TrainOptions one = Base(data_, 8, 1);
  one.val = dir_.Sub("val");
  TrainOptions four = Base(data_, 8, 4);
  four.val = dir_.Sub("val");
  const auto single = TrainJob(1, one, dir_.path().string(), "val1");
  const auto outs = TrainJob(4, four, dir_.path().string(), "val4");
  ASSERT_FALSE(single[0].params.empty());
  ASSERT_FALSE(outs[0].params.empty());
  EXPECT_EQ(single[0].val_samples, 21u);
  for (const RankOut& r : outs) {
    EXPECT_EQ(r.val_samples, 21u);
    EXPECT_EQ(r.val_accuracy, single[0].val_accuracy);
  }
}

}  // namespace
}  // namespace ddpio::trainer
