#include "ddpio/loader/loader.h"

#include <cstring>
#include <algorithm>
#include <map>
#include <set>

#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/fake_cuda.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::loader {
namespace {

struct Collected {
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::vector<int32_t>> labels;
  std::vector<std::vector<uint64_t>> indices;
  std::vector<std::vector<uint8_t>> valid;
};

class LoaderTest : public ::testing::Test {
 protected:
  void Open(uint64_t n, const std::vector<uint64_t>& corrupt = {}) {
    ASSERT_OK(testing::WriteJpegDataset(dir_.Sub("ds"), n, 40, 5, corrupt));
    ASSERT_OK_AND_ASSIGN(reader_, storage::DatasetReader::Open(dir_.Sub("ds")));
  }
  sampler::SamplerOptions Sampler(int world = 1, sampler::Padding padding = sampler::Padding::kPad) {
    sampler::SamplerOptions s;
    s.dataset_size = reader_->size();
    s.num_replicas = world;
    s.padding = padding;
    return s;
  }
  LoaderOptions Options(int workers) {
    LoaderOptions o;
    o.workers = workers;
    o.batch_size = 8;
    o.augment.size = 24;
    return o;
  }
  // Runs one epoch and copies everything out.
  absl::StatusOr<Collected> Epoch(Loader& l, uint64_t epoch, uint64_t start = 0, int max_batches = -1) {
    Collected c;
    absl::Status st = l.StartEpoch(epoch, start);
    if (!st.ok()) return st;
    for (int b = 0; max_batches < 0 || b < max_batches; ++b) {
      auto batch = l.Next();
      if (absl::IsOutOfRange(batch.status())) break;
      if (!batch.ok()) return batch.status();
      c.data.emplace_back(batch->data, batch->data + batch->bytes);
      c.labels.emplace_back(batch->labels, batch->labels + batch->size);
      c.indices.emplace_back(batch->indices, batch->indices + batch->size);
      c.valid.emplace_back(batch->valid, batch->valid + batch->size);
    }
    return c;
  }
  testing::TempDir dir_;
  std::unique_ptr<storage::DatasetReader> reader_;
};

TEST_F(LoaderTest, SameBatchesForOneTwoAndFourWorkers) {
  Open(61);
  for (OutputFormat format : {OutputFormat::kUint8Nhwc, OutputFormat::kFloatNchw}) {
    std::vector<Collected> runs;
    for (int workers : {1, 2, 4}) {
      LoaderOptions o = Options(workers);
      o.output = format;
      ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o));
      ASSERT_OK_AND_ASSIGN(Collected c, Epoch(*l, 3));
      runs.push_back(std::move(c));
    }
    ASSERT_EQ(runs[0].data.size(), 8u);  // ceil(61 / 8)
    for (int r = 1; r < 3; ++r) {
      EXPECT_EQ(runs[r].data, runs[0].data);
      EXPECT_EQ(runs[r].indices, runs[0].indices);
      EXPECT_EQ(runs[r].labels, runs[0].labels);
    }
  }
}

TEST_F(LoaderTest, BatchesFollowTheSamplerAndEndTheEpoch) {
  Open(50);
  ASSERT_OK_AND_ASSIGN(auto s, sampler::DistributedSampler::Create(Sampler(3)));
  ASSERT_OK_AND_ASSIGN(auto plan, s.Plan(2));
  sampler::RankStream want = plan.Stream(1);  // 17 samples
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(3), 1, Options(2)));
  ASSERT_OK_AND_ASSIGN(Collected c, Epoch(*l, 2));
  std::vector<uint64_t> got;
  for (size_t b = 0; b < c.indices.size(); ++b) {
    got.insert(got.end(), c.indices[b].begin(), c.indices[b].end());
    for (size_t k = 0; k < c.indices[b].size(); ++k) EXPECT_EQ(c.labels[b][k], static_cast<int32_t>(c.indices[b][k] % 5));
  }
  EXPECT_EQ(got, want.indices);
  ASSERT_EQ(c.indices.size(), 3u);
  EXPECT_EQ(c.indices.back().size(), 1u);  // 17 = 8 + 8 + 1
  EXPECT_CODE(l->Next(), kOutOfRange);       // and it stays at the end
  LoaderOptions drop = Options(2);
  drop.drop_last = true;
  ASSERT_OK_AND_ASSIGN(auto ld, Loader::Create(reader_.get(), Sampler(3), 1, drop));
  ASSERT_OK_AND_ASSIGN(Collected cd, Epoch(*ld, 2));
  EXPECT_EQ(cd.indices.size(), 2u);
}

TEST_F(LoaderTest, AugmentationDependsOnSeedEpochAndIndexOnly) {
  Open(16);
  ASSERT_OK_AND_ASSIGN(auto a, Loader::Create(reader_.get(), Sampler(), 0, Options(1)));
  ASSERT_OK_AND_ASSIGN(auto b, Loader::Create(reader_.get(), Sampler(), 0, Options(3)));
  ASSERT_OK_AND_ASSIGN(Collected e1a, Epoch(*a, 1));
  ASSERT_OK_AND_ASSIGN(Collected e1b, Epoch(*b, 1));
  EXPECT_EQ(e1a.data, e1b.data);
  // Same sample in another epoch: another crop. Compare per index.
  ASSERT_OK_AND_ASSIGN(Collected e2, Epoch(*a, 2));
  std::map<uint64_t, std::vector<uint8_t>> first, second;
  const size_t sb = a->sample_bytes();
  for (size_t bt = 0; bt < e1a.indices.size(); ++bt)
    for (size_t k = 0; k < e1a.indices[bt].size(); ++k)
      first[e1a.indices[bt][k]].assign(e1a.data[bt].begin() + k * sb, e1a.data[bt].begin() + (k + 1) * sb);
  for (size_t bt = 0; bt < e2.indices.size(); ++bt)
    for (size_t k = 0; k < e2.indices[bt].size(); ++k)
      second[e2.indices[bt][k]].assign(e2.data[bt].begin() + k * sb, e2.data[bt].begin() + (k + 1) * sb);
  int differ = 0;
  for (auto& [index, pixels] : first) differ += pixels != second[index];
  EXPECT_GE(differ, 14);
}

TEST_F(LoaderTest, CorruptJpegFailsByDefaultAndIsSkippedOnRequest) {
  Open(20, /*corrupt=*/{5, 13});
  sampler::SamplerOptions seq = Sampler();
  seq.shuffle = false;
  ASSERT_OK_AND_ASSIGN(auto fail, Loader::Create(reader_.get(), seq, 0, Options(2)));
  ASSERT_OK(fail->StartEpoch(0));
  auto b0 = fail->Next();  // indices 0..7 hold record 5
  EXPECT_CODE(b0, kDataLoss);
  EXPECT_NE(b0.status().message().find("sample 5 (key 0000000000000005)"), absl::string_view::npos)
      << b0.status();
  LoaderOptions o = Options(2);
  o.bad_samples = BadSamplePolicy::kSkip;
  ASSERT_OK_AND_ASSIGN(auto skip, Loader::Create(reader_.get(), seq, 0, o));
  ASSERT_OK_AND_ASSIGN(Collected c, Epoch(*skip, 0));
  EXPECT_EQ(c.valid[0][5], 0);
  EXPECT_EQ(c.valid[1][13 - 8], 0);
  EXPECT_EQ(c.valid[0][4], 1);
  const size_t sb = skip->sample_bytes();
  EXPECT_TRUE(std::all_of(c.data[0].begin() + 5 * sb, c.data[0].begin() + 6 * sb, [](uint8_t v) { return v == 0; }));
  LoaderStats st = skip->stats();
  EXPECT_EQ(st.bad_samples, 2u);
  ASSERT_EQ(st.skipped.size(), 2u);
  std::set<uint64_t> which = {st.skipped[0].index, st.skipped[1].index};
  EXPECT_EQ(which, (std::set<uint64_t>{5, 13}));
}

TEST_F(LoaderTest, SamplerPaddingIsFlaggedInvalid) {
  Open(10);
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(4, sampler::Padding::kMask), 3, Options(1)));
  ASSERT_OK_AND_ASSIGN(Collected c, Epoch(*l, 0));
  ASSERT_EQ(c.valid.size(), 1u);
  EXPECT_EQ(c.valid[0], (std::vector<uint8_t>{1, 1, 0}));  // rank 3 of 4 over 10: last is padding
}

TEST_F(LoaderTest, ResumeMidEpochContinuesWithTheSameBatches) {
  Open(70);
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(2), 1, Options(2)));
  ASSERT_OK_AND_ASSIGN(Collected full, Epoch(*l, 4));
  ASSERT_OK_AND_ASSIGN(Collected head, Epoch(*l, 4, 0, /*max_batches=*/2));
  const uint64_t position = l->ResumePosition();
  EXPECT_EQ(position, 2u * 8 * 2);  // 2 batches of 8 on each of 2 ranks
  ASSERT_OK_AND_ASSIGN(auto resumed, Loader::Create(reader_.get(), Sampler(2), 1, Options(1)));
  ASSERT_OK_AND_ASSIGN(Collected tail, Epoch(*resumed, 4, position));
  ASSERT_EQ(tail.data.size() + 2, full.data.size());
  for (size_t b = 0; b < tail.data.size(); ++b) {
    EXPECT_EQ(tail.indices[b], full.indices[b + 2]);
    EXPECT_EQ(tail.data[b], full.data[b + 2]);
  }
}

TEST_F(LoaderTest, ShutdownMidEpochAndRestartDoNotHang) {
  Open(200);
  for (int round = 0; round < 5; ++round) {
    ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, Options(3)));
    ASSERT_OK(l->StartEpoch(0));
    ASSERT_OK(l->Next());
    ASSERT_OK(l->StartEpoch(1));  // abandons epoch 0 with work in flight
    ASSERT_OK(l->Next());
  }  // destroyed mid-epoch; the test's timeout catches a hang
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, Options(2)));
  EXPECT_CODE(l->Next(), kFailedPrecondition);  // before StartEpoch
}

TEST_F(LoaderTest, SlotsAreAllocatedOnceAndReused) {
  Open(100);
  LoaderOptions o = Options(2);
  o.prefetch = 2;
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o));
  std::set<const uint8_t*> buffers;
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    ASSERT_OK(l->StartEpoch(epoch));
    for (;;) {
      auto b = l->Next();
      if (absl::IsOutOfRange(b.status())) break;
      ASSERT_OK(b);
      buffers.insert(b->data);
    }
  }
  LoaderStats st = l->stats();
  EXPECT_EQ(st.slots, 3);                  // max(prefetch, workers) + 1
  EXPECT_LE(buffers.size(), 3u);           // 39 batches, at most 3 distinct buffers
  EXPECT_EQ(st.slot_allocations, 3u);
  EXPECT_EQ(st.slot_bytes, 3u * 8 * 24 * 24 * 3);
  EXPECT_EQ(st.images, 300u);
}

TEST_F(LoaderTest, FloatOutputIsNormalisedNchwOfTheUint8Pixels) {
  Open(8);
  LoaderOptions u = Options(1), f = Options(1);
  f.output = OutputFormat::kFloatNchw;
  ASSERT_OK_AND_ASSIGN(auto lu, Loader::Create(reader_.get(), Sampler(), 0, u));
  ASSERT_OK_AND_ASSIGN(auto lf, Loader::Create(reader_.get(), Sampler(), 0, f));
  ASSERT_OK_AND_ASSIGN(Collected cu, Epoch(*lu, 0));
  ASSERT_OK_AND_ASSIGN(Collected cf, Epoch(*lf, 0));
  const float* fl = reinterpret_cast<const float*>(cf.data[0].data());
  const int s = 24, plane = s * s;
  for (int k = 0; k < 8; ++k) {
    for (int y = 0; y < s; y += 5) {
      for (int x = 0; x < s; x += 3) {
        for (int c = 0; c < 3; ++c) {
          uint8_t v = cu.data[0][k * plane * 3 + (y * s + x) * 3 + c];
          float want = (v / 255.0f - f.mean[c]) / f.stddev[c];
          ASSERT_NEAR(fl[k * plane * 3 + c * plane + y * s + x], want, 1e-5);
        }
      }
    }
  }
}

TEST_F(LoaderTest, CopiesBatchesToTheDeviceAndWaitsBeforeHandingThemOut) {
  Open(30);
  testing::FakeCuda cuda;
  LoaderOptions o = Options(2);
  o.copy_to_device = true;
  {
    ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o, &cuda));
    EXPECT_EQ(l->stats().memory, HostMemoryKind::kCudaPinned);
    ASSERT_OK(l->StartEpoch(0));
    int batches = 0;
    for (;;) {
      auto b = l->Next();
      if (absl::IsOutOfRange(b.status())) break;
      ASSERT_OK(b);
      ASSERT_NE(b->device_data, nullptr);
      EXPECT_EQ(std::memcmp(b->device_data, b->data, b->bytes), 0);
      ++batches;
    }
    EXPECT_EQ(batches, 4);
    EXPECT_EQ(cuda.copies, 4);
    EXPECT_EQ(cuda.waits, 4);
    EXPECT_EQ(cuda.waits_on_unrecorded, 0);  // every wait follows its record
  }
  EXPECT_EQ(cuda.device_allocs, cuda.device_frees);
  EXPECT_EQ(cuda.host_allocs, cuda.host_frees);
  EXPECT_TRUE(cuda.events.empty());
}

TEST_F(LoaderTest, InvalidConfigurations) {
  Open(10);
  EXPECT_CODE(Loader::Create(reader_.get(), Sampler(2), 2, Options(1)), kInvalidArgument);
  LoaderOptions zero = Options(1);
  zero.batch_size = 0;
  EXPECT_CODE(Loader::Create(reader_.get(), Sampler(), 0, zero), kInvalidArgument);
  sampler::SamplerOptions wrong = Sampler();
  wrong.dataset_size = 11;
  EXPECT_CODE(Loader::Create(reader_.get(), wrong, 0, Options(1)), kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::loader
