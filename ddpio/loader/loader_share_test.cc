// At an epoch's end a worker with no batch left to claim helps finish the batches the others are
// still assembling, sample by sample. These tests force the sharing with the loader's test hook
// (a worker's sample waits until a helper has done something) and check that a shared batch is
// the batch one worker makes, and that its error is the one one worker would meet.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "ddpio/loader/internal/loader_testing.h"
#include "ddpio/loader/loader.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::loader {

// Sees the loader's sample events (before and after each sample) and lets a test hold a worker
// at one of them until a condition on the events seen so far holds (20 s at most).
class LoaderTestPeer {
 public:
  struct Event {
    uint64_t step, position;
    bool helping, done;
    absl::Status status;
  };
  using Condition = std::function<bool(const std::vector<Event>&)>;

  // Workers reaching the event (step, position, helping = false, done = false) wait for `until`.
  LoaderTestPeer(Loader& loader, uint64_t step, uint64_t position, Condition until)
      : step_(step), position_(position), until_(std::move(until)) {
    internal::SetSampleHookForTest(loader, [this](const internal::SampleEvent& e) { Seen(e); });
  }

  std::vector<Event> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // False if the held worker gave up waiting.
  bool held_until_met() {
    std::lock_guard<std::mutex> lock(mu_);
    return met_;
  }

 private:
  void Seen(const internal::SampleEvent& e) {
    std::unique_lock<std::mutex> lock(mu_);
    events_.push_back({e.step, e.position, e.helping, e.done, e.status});
    cv_.notify_all();
    if (e.step == step_ && e.position == position_ && !e.helping && !e.done) {
      met_ = cv_.wait_for(lock, std::chrono::seconds(20), [&] { return until_(events_); });
    }
  }

  const uint64_t step_, position_;
  const Condition until_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  bool met_ = false;
};

namespace {

class LoaderShareTest : public ::testing::Test {
 protected:
  void Open(uint64_t n, const std::vector<uint64_t>& corrupt = {}) {
    ASSERT_OK(testing::WriteJpegDataset(dir_.Sub("ds"), n, 40, 5, corrupt));
    ASSERT_OK_AND_ASSIGN(reader_, storage::DatasetReader::Open(dir_.Sub("ds")));
  }
  sampler::SamplerOptions InOrder() {
    sampler::SamplerOptions s;
    s.dataset_size = reader_->size();
    s.num_replicas = 1;
    s.shuffle = false;
    return s;
  }
  LoaderOptions Options(int workers, BadSamplePolicy bad = BadSamplePolicy::kFail) {
    LoaderOptions o;
    o.workers = workers;
    o.batch_size = 8;
    o.augment.size = 24;
    o.bad_samples = bad;
    return o;
  }
  struct Copied {
    std::vector<uint8_t> data, valid;
    std::vector<int32_t> labels;
    std::vector<uint64_t> indices;
    bool operator==(const Copied&) const = default;
  };
  static absl::StatusOr<Copied> First(Loader& l) {
    if (absl::Status st = l.StartEpoch(0); !st.ok()) return st;
    absl::StatusOr<Batch> b = l.Next();
    if (!b.ok()) return b.status();
    Copied c;
    c.data.assign(b->data, b->data + b->bytes);
    c.valid.assign(b->valid, b->valid + b->size);
    c.labels.assign(b->labels, b->labels + b->size);
    c.indices.assign(b->indices, b->indices + b->size);
    return c;
  }
  static bool AnyHelped(const std::vector<LoaderTestPeer::Event>& events) {
    for (const auto& e : events) {
      if (e.helping && e.done) return true;
    }
    return false;
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::DatasetReader> reader_;
};

TEST_F(LoaderShareTest, AWorkerOutOfBatchesHelpsAssembleTheLastOne) {
  // One batch, two workers: one assembles it, the other has nothing to claim. The batch's first
  // sample waits until the other worker has assembled one of its samples, so the batch is
  // finished only if the idle worker helps. Sample 3 is corrupt and skipped, wherever it lands.
  Open(8, /*corrupt=*/{3});
  ASSERT_OK_AND_ASSIGN(
      auto one, Loader::Create(reader_.get(), InOrder(), 0, Options(1, BadSamplePolicy::kSkip)));
  ASSERT_OK_AND_ASSIGN(Copied alone, First(*one));
  ASSERT_OK_AND_ASSIGN(
      auto two, Loader::Create(reader_.get(), InOrder(), 0, Options(2, BadSamplePolicy::kSkip)));
  LoaderTestPeer peer(*two, /*step=*/0, /*position=*/0, AnyHelped);
  ASSERT_OK_AND_ASSIGN(Copied shared, First(*two));
  EXPECT_TRUE(peer.held_until_met()) << "no worker helped while the batch's first sample waited";
  EXPECT_TRUE(shared == alone) << "a shared batch differs from the batch one worker makes";
  EXPECT_EQ(shared.valid[3], 0);
  // Each position assembled exactly once, some of them by the helper.
  std::map<uint64_t, int> done;
  uint64_t helped = 0;
  for (const auto& e : peer.events()) {
    if (!e.done) continue;
    ++done[e.position];
    if (e.helping) ++helped;
  }
  ASSERT_EQ(done.size(), 8u);
  for (const auto& [position, times] : done) EXPECT_EQ(times, 1) << "position " << position;
  const LoaderStats st = two->stats();
  EXPECT_EQ(st.shared_samples, helped);
  EXPECT_GE(st.shared_samples, 1u);
  EXPECT_EQ(st.images + st.bad_samples, 8u);
  EXPECT_EQ(st.bad_samples, 1u);
}

TEST_F(LoaderShareTest, TheLowestFailingSampleIsTheBatchsErrorWhoeverMeetsItFirst) {
  // Samples 0 and 2 are corrupt. The owner holds sample 0 until the helper has failed on
  // sample 2 and recorded it; the batch must still fail naming sample 0, the error one worker
  // going in order meets (not the first recorded).
  Open(8, /*corrupt=*/{0, 2});
  ASSERT_OK_AND_ASSIGN(auto one, Loader::Create(reader_.get(), InOrder(), 0, Options(1)));
  const absl::Status alone = First(*one).status();
  ASSERT_FALSE(alone.ok());
  ASSERT_NE(alone.message().find("sample 0 (key 0000000000000000"), absl::string_view::npos)
      << alone;
  ASSERT_OK_AND_ASSIGN(auto two, Loader::Create(reader_.get(), InOrder(), 0, Options(2)));
  LoaderTestPeer peer(*two, /*step=*/0, /*position=*/0, [](const auto& events) {
    for (const auto& e : events) {
      if (e.helping && e.done && e.position == 2 && !e.status.ok()) return true;
    }
    return false;
  });
  const absl::Status shared = First(*two).status();
  EXPECT_TRUE(peer.held_until_met()) << "the helper never failed on sample 2";
  EXPECT_EQ(shared, alone);
}

TEST_F(LoaderShareTest, SharingLeavesEveryEpochAsOneWorkerMakesIt) {
  // Many epochs of a tail (9 batches, the last of 3 samples) on three workers, against one
  // worker: whatever sharing the timing gives, the batches are the same.
  Open(67);
  sampler::SamplerOptions shuffled = InOrder();
  shuffled.shuffle = true;
  ASSERT_OK_AND_ASSIGN(auto one, Loader::Create(reader_.get(), shuffled, 0, Options(1)));
  ASSERT_OK_AND_ASSIGN(auto three, Loader::Create(reader_.get(), shuffled, 0, Options(3)));
  for (uint64_t epoch = 0; epoch < 6; ++epoch) {
    ASSERT_OK(one->StartEpoch(epoch));
    ASSERT_OK(three->StartEpoch(epoch));
    for (;;) {
      auto a = one->Next();
      auto b = three->Next();
      if (absl::IsOutOfRange(a.status())) {
        EXPECT_CODE(b, kOutOfRange);
        break;
      }
      ASSERT_OK(a);
      ASSERT_OK(b);
      ASSERT_EQ(a->size, b->size);
      EXPECT_EQ(std::vector<uint8_t>(a->data, a->data + a->bytes),
                std::vector<uint8_t>(b->data, b->data + b->bytes))
          << "epoch " << epoch << " batch " << a->step;
      EXPECT_EQ(std::vector<uint64_t>(a->indices, a->indices + a->size),
                std::vector<uint64_t>(b->indices, b->indices + b->size));
    }
  }
  EXPECT_EQ(three->stats().images, one->stats().images);
}

}  // namespace
}  // namespace ddpio::loader
