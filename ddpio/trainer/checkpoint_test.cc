#include "ddpio/trainer/checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::trainer {
namespace {

Checkpoint Sample() {
  Checkpoint c;
  c.epoch = 3;
  c.position = 1234;
  c.step = 77;
  c.sampler_seed = 5;
  c.augment_seed = 6;
  c.dataset_size = 1000;
  c.momentum_started = true;
  c.params = {1.5f, -2.25f, 3.0f};
  c.momentum = {0.1f, 0.2f, -0.3f};
  return c;
}

TEST(Checkpoint, RoundTripsAndReplacesAtomically) {
  ddpio::testing::TempDir top;
  const std::string dir_path = top.Sub("a/b");  // created on the first write
  EXPECT_CODE(ReadCheckpoint(dir_path), kNotFound);
  ASSERT_OK(WriteCheckpoint(dir_path, Sample()));
  Checkpoint next = Sample();
  next.step = 78;
  ASSERT_OK(WriteCheckpoint(dir_path, next));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ReadCheckpoint(dir_path));
  EXPECT_EQ(back.epoch, 3u);
  EXPECT_EQ(back.position, 1234u);
  EXPECT_EQ(back.step, 78u);
  EXPECT_EQ(back.sampler_seed, 5u);
  EXPECT_EQ(back.augment_seed, 6u);
  EXPECT_EQ(back.dataset_size, 1000u);
  EXPECT_TRUE(back.momentum_started);
  EXPECT_EQ(back.params, next.params);
  EXPECT_EQ(back.momentum, next.momentum);
  EXPECT_FALSE(std::ifstream(dir_path + "/checkpoint.bin.tmp").good());  // no temporary left behind
}

// A writer killed mid-write leaves checkpoint.bin.tmp; the next run's rank 0 removes it and the
// checkpoint stays readable.
TEST(Checkpoint, AKilledWritersTemporaryIsRemovedAndTheCheckpointKept) {
  ddpio::testing::TempDir top;
  const std::string dir = top.Sub("ckpt");
  ASSERT_OK(WriteCheckpoint(dir, Sample()));
  std::ofstream(dir + "/checkpoint.bin.tmp") << "half a checkpoint";
  RemoveStaleCheckpointTemp(dir);
  EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint.bin.tmp"));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ReadCheckpoint(dir));
  EXPECT_EQ(back.step, 77u);
  RemoveStaleCheckpointTemp(dir);  // nothing to remove: no error
}

// Checkpoints written before the checksum was true FNV-1a (version 2, its offset basis
// truncated) still load; an unknown version is refused naming it.
// FNV-1a-64 with the offset basis given, appended to `body` (a checkpoint's checksum).
std::string WithChecksum(std::string body, uint64_t basis = 14695981039346656037ull) {
  uint64_t h = basis;
  for (unsigned char c : body) h = (h ^ c) * 1099511628211ull;
  for (int i = 0; i < 8; ++i) body.push_back(static_cast<char>(h >> (8 * i)));
  return body;
}

void Overwrite(const std::string& dir, const std::string& bytes) {
  std::ofstream(CheckpointPath(dir), std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Checkpoint, TheBlockOrderRoundTripsAndOlderVersionsLoadAsTheExactOrder) {
  ddpio::testing::TempDir top;
  const std::string dir = top.Sub("ckpt");
  Checkpoint block = Sample();
  block.order = sampler::Order::kBlock;
  block.block_chunk = 128;
  block.block_window = 7;
  block.block_lanes = 3;
  ASSERT_OK(WriteCheckpoint(dir, block));
  ASSERT_OK_AND_ASSIGN(Checkpoint back, ReadCheckpoint(dir));
  EXPECT_EQ(back.order, sampler::Order::kBlock);
  EXPECT_EQ(back.block_chunk, 128u);
  EXPECT_EQ(back.block_window, 7u);
  EXPECT_EQ(back.block_lanes, 3u);
  std::ifstream in(CheckpointPath(dir), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.substr(0, 8), "DDPIOCK4");
  // Versions 3 and 2: the same content without the order's 25 bytes (after the six u64 fields).
  const std::string rest = bytes.substr(8, 48) + bytes.substr(8 + 48 + 25, bytes.size() - 81 - 8);
  for (const auto& [magic, basis] :
       {std::pair<std::string, uint64_t>{"DDPIOCK3", 14695981039346656037ull},
        {"DDPIOCK2", 1469598103934665603ull}}) {
    Overwrite(dir, WithChecksum(magic + rest, basis));
    ASSERT_OK_AND_ASSIGN(Checkpoint old, ReadCheckpoint(dir));
    EXPECT_EQ(old.order, sampler::Order::kExact) << magic;
    EXPECT_EQ(old.block_lanes, 0u) << magic;
    EXPECT_EQ(old.step, 77u) << magic;
    EXPECT_EQ(old.params, Sample().params) << magic;
  }
  // An order this build does not know, checksum intact: named, not guessed.
  std::string unknown = bytes.substr(0, bytes.size() - 8);
  unknown[8 + 48] = 7;
  Overwrite(dir, WithChecksum(unknown));
  auto refused = ReadCheckpoint(dir);
  EXPECT_CODE(refused, kDataLoss);
  EXPECT_NE(refused.status().message().find("unknown sample order 7"), std::string::npos)
      << refused.status();
  std::string v9 = bytes;
  v9[7] = '9';
  Overwrite(dir, v9);
  refused = ReadCheckpoint(dir);
  EXPECT_CODE(refused, kDataLoss);
  EXPECT_NE(refused.status().message().find("format version 9"), std::string::npos)
      << refused.status();
}

TEST(Checkpoint, DamageIsDataLossAndAFailedWriteKeepsTheOldOne) {
  ddpio::testing::TempDir dir;
  ASSERT_OK(WriteCheckpoint(dir.path().string(), Sample()));
  std::string bytes;
  {
    std::ifstream in(CheckpointPath(dir.path().string()), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t cut : {size_t{0}, size_t{10}, bytes.size() - 1}) {
    std::ofstream(CheckpointPath(dir.path().string()), std::ios::binary) << bytes.substr(0, cut);
    EXPECT_CODE(ReadCheckpoint(dir.path().string()), kDataLoss) << "cut at " << cut;
  }
  std::string flipped = bytes;
  flipped[50] ^= 1;
  std::ofstream(CheckpointPath(dir.path().string()), std::ios::binary) << flipped;
  EXPECT_CODE(ReadCheckpoint(dir.path().string()), kDataLoss);
  std::ofstream(dir.Sub("plain")) << "x";
  EXPECT_FALSE(
      WriteCheckpoint(dir.Sub("plain/dir"), Sample()).ok());  // a file where a directory must go
  // A write that fails (its temporary's name is taken by a directory) leaves the old checkpoint.
  std::ofstream(CheckpointPath(dir.path().string()), std::ios::binary) << bytes;
  std::filesystem::create_directory(dir.Sub("checkpoint.bin.tmp"));
  Checkpoint next = Sample();
  next.step = 99;
  EXPECT_FALSE(WriteCheckpoint(dir.path().string(), next).ok());
  ASSERT_OK_AND_ASSIGN(Checkpoint old, ReadCheckpoint(dir.path().string()));
  EXPECT_EQ(old.step, 77u);
}

TEST(CompareParams, MeasuresTheLargestDifferenceAgainstTheLargestParameter) {
  Checkpoint a = Sample(), b = Sample();  // params {1.5, -2.25, 3.0}
  ASSERT_OK_AND_ASSIGN(ParamDifference same, CompareParams(a, b));
  EXPECT_EQ(same.count, 3u);
  EXPECT_EQ(same.differing, 0u);
  EXPECT_EQ(same.max_relative, 0.0);
  a.params[1] = -2.25f + 0.0006f;  // |diff| 0.0006 of max |b| 3.0: 2e-4
  a.params[0] = 1.5f + 0.0003f;
  ASSERT_OK_AND_ASSIGN(ParamDifference d, CompareParams(a, b));
  EXPECT_EQ(d.differing, 2u);
  EXPECT_NEAR(d.max_abs, 0.0006, 1e-7);
  EXPECT_NEAR(d.max_relative, 0.0002, 1e-7);
  // -0 and +0 are equal numbers but not the same bits; a NaN makes the difference infinite.
  b.params = {0.0f, 1.0f, 1.0f};
  a.params = {-0.0f, 1.0f, std::numeric_limits<float>::quiet_NaN()};
  ASSERT_OK_AND_ASSIGN(ParamDifference n, CompareParams(a, b));
  EXPECT_EQ(n.differing, 2u);
  EXPECT_TRUE(std::isinf(n.max_relative));
  a.params.pop_back();
  EXPECT_CODE(CompareParams(a, b), kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::trainer
