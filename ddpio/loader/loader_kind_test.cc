// The sample-kind seam (sample_kind.h): a loader given another kind of sample than images makes
// its batches of that kind's bytes, with no image setting involved — the layout, the stand-in for
// a skipped sample, the stage times and the one worker per thread are all the kind's.
#include <atomic>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "ddpio/loader/internal/loader_testing.h"
#include "ddpio/loader/loader.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::loader {
namespace {

// A sample is 16 bytes: the dataset index and the epoch (uint64 each). Indices listed as bad
// are DataLoss; the stand-in for a skipped one is 0xee bytes. Each Fill adds 1, 2 and 3 ns.
class IndexKind : public SampleKind {
 public:
  explicit IndexKind(std::set<uint64_t> bad) : bad_(std::move(bad)) {}
  size_t sample_bytes() const override { return 16; }
  std::unique_ptr<SampleWorker> NewWorker() const override {
    ++workers_;
    return std::make_unique<Worker>(bad_);
  }
  int workers() const { return workers_; }

 private:
  class Worker : public SampleWorker {
   public:
    explicit Worker(const std::set<uint64_t>& bad) : bad_(bad) {}
    absl::Status Fill(const storage::RecordView& record, uint64_t index, uint64_t epoch,
                      absl::Span<uint8_t> out, SampleNanos* nanos) override {
      nanos->decode += 1;
      nanos->augment += 2;
      nanos->collate += 3;
      if (bad_.count(index) != 0) return absl::DataLossError("bad on purpose");
      if (out.size() != 16 || record.payload.empty()) return absl::InternalError("wrong call");
      std::memcpy(out.data(), &index, 8);
      std::memcpy(out.data() + 8, &epoch, 8);
      return absl::OkStatus();
    }
    void Zero(absl::Span<uint8_t> out) override { std::memset(out.data(), 0xee, out.size()); }

   private:
    const std::set<uint64_t>& bad_;
  };

  const std::set<uint64_t> bad_;
  mutable std::atomic<int> workers_{0};
};

class LoaderKindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(testing::WriteJpegDataset(dir_.Sub("ds"), 20, 40, 5));
    ASSERT_OK_AND_ASSIGN(reader_, storage::DatasetReader::Open(dir_.Sub("ds")));
  }
  sampler::SamplerOptions Sampler() {
    sampler::SamplerOptions s;
    s.dataset_size = reader_->size();
    s.num_replicas = 1;
    return s;
  }
  LoaderOptions Options(BadSamplePolicy bad) {
    LoaderOptions o;
    o.workers = 3;
    o.batch_size = 8;
    o.augment.size = 0;  // no image setting matters (the image kind would refuse this one)
    o.bad_samples = bad;
    return o;
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::DatasetReader> reader_;
};

TEST_F(LoaderKindTest, BatchesAreTheKindsSamplesInSamplerOrder) {
  auto kind = std::make_unique<IndexKind>(std::set<uint64_t>{6});
  const IndexKind* k = kind.get();
  ASSERT_OK_AND_ASSIGN(auto loader, internal::CreateLoaderWithKindForTest(
                                        reader_.get(), Sampler(), 0,
                                        Options(BadSamplePolicy::kSkip), std::move(kind)));
  EXPECT_EQ(k->workers(), 3) << "one worker of the kind per loader thread";
  EXPECT_EQ(loader->sample_bytes(), 16u);
  ASSERT_OK(loader->StartEpoch(2));
  uint64_t samples = 0;
  for (;;) {
    auto batch = loader->Next();
    if (absl::IsOutOfRange(batch.status())) break;
    ASSERT_OK(batch);
    ASSERT_EQ(batch->bytes, batch->size * 16);
    for (uint64_t p = 0; p < batch->size; ++p, ++samples) {
      const uint64_t index = batch->indices[p];
      EXPECT_EQ(batch->labels[p], static_cast<int32_t>(index % 5)) << "the record's label";
      uint64_t got[2];
      std::memcpy(got, batch->data + p * 16, 16);
      if (index == 6) {
        EXPECT_EQ(batch->valid[p], 0);
        EXPECT_EQ(got[0], 0xeeeeeeeeeeeeeeeeu) << "the kind's stand-in for a skipped sample";
        continue;
      }
      EXPECT_EQ(batch->valid[p], 1);
      EXPECT_EQ(got[0], index);
      EXPECT_EQ(got[1], 2u);
    }
  }
  EXPECT_EQ(samples, 20u);
  const LoaderStats st = loader->stats();
  EXPECT_EQ(st.images, 19u);
  EXPECT_EQ(st.bad_samples, 1u);
  ASSERT_EQ(st.skipped.size(), 1u);
  EXPECT_EQ(st.skipped[0].index, 6u);
  EXPECT_EQ(st.decode_ns, 20u);
  EXPECT_EQ(st.augment_ns, 40u);
  EXPECT_EQ(st.collate_ns, 60u);
}

TEST_F(LoaderKindTest, AKindsDataLossFailsTheBatchNamingTheSample) {
  std::set<uint64_t> every;
  for (uint64_t i = 0; i < 20; ++i) every.insert(i);
  ASSERT_OK_AND_ASSIGN(auto loader,
                       internal::CreateLoaderWithKindForTest(reader_.get(), Sampler(), 0,
                                                             Options(BadSamplePolicy::kFail),
                                                             std::make_unique<IndexKind>(every)));
  ASSERT_OK(loader->StartEpoch(0));
  auto batch = loader->Next();
  EXPECT_CODE(batch, kDataLoss);
  EXPECT_NE(batch.status().message().find("bad on purpose"), absl::string_view::npos)
      << batch.status();
  EXPECT_NE(batch.status().message().find("(key "), absl::string_view::npos) << batch.status();
}

}  // namespace
}  // namespace ddpio::loader
