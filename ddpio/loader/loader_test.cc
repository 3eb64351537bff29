#include "ddpio/loader/loader.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ddpio/common/status_macros.h"
#include "ddpio/loader/record_source.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
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
  sampler::SamplerOptions Sampler(int world = 1,
                                  sampler::Padding padding = sampler::Padding::kPad) {
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
  absl::StatusOr<Collected> Epoch(Loader& l, uint64_t epoch, uint64_t start = 0,
                                  int max_batches = -1) {
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
  // A batch from NextHeld and a copy of what it showed when it was handed out.
  struct Kept {
    HeldBatch held;
    std::vector<uint8_t> data;
    std::vector<int32_t> labels;
    std::vector<uint64_t> indices;
    std::vector<uint8_t> valid;
  };
  static Kept Keep(HeldBatch held) {
    Kept k;
    const Batch& b = held.batch;
    k.data.assign(b.data, b.data + b.bytes);
    k.labels.assign(b.labels, b.labels + b.size);
    k.indices.assign(b.indices, b.indices + b.size);
    k.valid.assign(b.valid, b.valid + b.size);
    k.held = std::move(held);
    return k;
  }
  // Whether a held batch still shows what it showed when handed out.
  static ::testing::AssertionResult Unchanged(const Kept& k) {
    const Batch& b = k.held.batch;
    if (b.bytes != k.data.size() || b.size != k.indices.size()) {
      return ::testing::AssertionFailure() << "step " << b.step << ": sizes changed";
    }
    if (!std::equal(k.data.begin(), k.data.end(), b.data)) {
      return ::testing::AssertionFailure() << "step " << b.step << ": pixels changed";
    }
    if (!std::equal(k.labels.begin(), k.labels.end(), b.labels)) {
      return ::testing::AssertionFailure() << "step " << b.step << ": labels changed";
    }
    if (!std::equal(k.indices.begin(), k.indices.end(), b.indices)) {
      return ::testing::AssertionFailure() << "step " << b.step << ": indices changed";
    }
    if (!std::equal(k.valid.begin(), k.valid.end(), b.valid)) {
      return ::testing::AssertionFailure() << "step " << b.step << ": validity changed";
    }
    return ::testing::AssertionSuccess();
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
    for (size_t k = 0; k < c.indices[b].size(); ++k)
      EXPECT_EQ(c.labels[b][k], static_cast<int32_t>(c.indices[b][k] % 5));
  }
  EXPECT_EQ(got, want.indices);
  ASSERT_EQ(c.indices.size(), 3u);
  EXPECT_EQ(c.indices.back().size(), 1u);  // 17 = 8 + 8 + 1
  EXPECT_CODE(l->Next(), kOutOfRange);     // and it stays at the end
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
      first[e1a.indices[bt][k]].assign(e1a.data[bt].begin() + k * sb,
                                       e1a.data[bt].begin() + (k + 1) * sb);
  for (size_t bt = 0; bt < e2.indices.size(); ++bt)
    for (size_t k = 0; k < e2.indices[bt].size(); ++k)
      second[e2.indices[bt][k]].assign(e2.data[bt].begin() + k * sb,
                                       e2.data[bt].begin() + (k + 1) * sb);
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
  EXPECT_NE(b0.status().message().find("sample 5 (key 0000000000000005, source 'img_5.jpg')"),
            absl::string_view::npos)
      << b0.status();
  LoaderOptions o = Options(2);
  o.bad_samples = BadSamplePolicy::kSkip;
  ASSERT_OK_AND_ASSIGN(auto skip, Loader::Create(reader_.get(), seq, 0, o));
  ASSERT_OK_AND_ASSIGN(Collected c, Epoch(*skip, 0));
  EXPECT_EQ(c.valid[0][5], 0);
  EXPECT_EQ(c.valid[1][13 - 8], 0);
  EXPECT_EQ(c.valid[0][4], 1);
  const size_t sb = skip->sample_bytes();
  EXPECT_TRUE(std::all_of(c.data[0].begin() + 5 * sb, c.data[0].begin() + 6 * sb,
                          [](uint8_t v) { return v == 0; }));
  LoaderStats st = skip->stats();
  EXPECT_EQ(st.bad_samples, 2u);
  ASSERT_EQ(st.skipped.size(), 2u);
  std::set<uint64_t> which = {st.skipped[0].index, st.skipped[1].index};
  EXPECT_EQ(which, (std::set<uint64_t>{5, 13}));
}

TEST_F(LoaderTest, SamplerPaddingIsFlaggedInvalid) {
  Open(10);
  ASSERT_OK_AND_ASSIGN(
      auto l, Loader::Create(reader_.get(), Sampler(4, sampler::Padding::kMask), 3, Options(1)));
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

// Batches are handed out in order, so a worker that finishes ahead of the oldest batch in flight
// must be able to start another instead of waiting for that batch's delivery. A source whose batch
// 0 arrives only once batch 2 has been asked for shows it: with two workers, one waits in batch 0
// while the other finishes batch 1 and goes on to batch 2 (a window of only `workers` batches would
// leave batch 2 unasked and batch 0 waiting until the source gives up).
class SecondBatchUnblocksFirst : public RecordSource {
 public:
  explicit SecondBatchUnblocksFirst(const sampler::SamplerOptions& options, uint64_t batch_size)
      : options_(options), batch_size_(batch_size) {}
  absl::StatusOr<std::shared_ptr<const SourcedBatch>> Fetch(
      uint64_t epoch, uint64_t step, const std::atomic<bool>& stop) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      asked_.insert(step);
      cv_.notify_all();
      if (step == 0 && !cv_.wait_for(lock, std::chrono::seconds(20),
                                     [&] { return stop || asked_.count(2) > 0; })) {
        return absl::DeadlineExceededError("batch 2 was never asked for while batch 0 waited");
      }
    }
    DDPIO_ASSIGN_OR_RETURN(auto sampler, sampler::DistributedSampler::Create(options_));
    sampler.SetEpoch(epoch);
    DDPIO_ASSIGN_OR_RETURN(sampler::EpochPlan plan, sampler.NextPlan());
    const auto batches = sampler::MakeBatches(plan.NumSamples(0), batch_size_, false);
    auto batch = std::make_shared<SourcedBatch>();
    batch->epoch = epoch;
    batch->step = step;
    for (uint64_t j = batches[step].begin; j < batches[step].end; ++j) {
      batch->indices.push_back(plan.IndexAt(0, j));
      batch->records.emplace_back();  // unreadable at the source: a bad sample, skipped
    }
    return batch;
  }
  void Wake() override {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  std::string name() const override { return "the test's source"; }

 private:
  const sampler::SamplerOptions options_;
  const uint64_t batch_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<uint64_t> asked_;
};

TEST_F(LoaderTest, AWorkerAheadOfTheOldestBatchStartsTheNext) {
  sampler::SamplerOptions so;
  so.dataset_size = 40;
  so.num_replicas = 1;
  LoaderOptions o = Options(2);
  o.prefetch = 1;  // the window is then the workers' own: max(prefetch, workers + 1) = 3
  o.bad_samples = BadSamplePolicy::kSkip;
  SecondBatchUnblocksFirst source(so, o.batch_size);
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(&source, so, 0, o));
  ASSERT_OK_AND_ASSIGN(Collected c, Epoch(*l, 0));
  ASSERT_EQ(c.indices.size(), 5u);
  for (const auto& valid : c.valid) {
    for (uint8_t v : valid) EXPECT_EQ(v, 0);  // every record came empty: skipped
  }
  EXPECT_EQ(l->stats().bad_samples, 40u);
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
  EXPECT_EQ(st.slots, 4);         // max(prefetch, workers + 1) + 1
  EXPECT_LE(buffers.size(), 4u);  // 39 batches, at most 4 distinct buffers
  EXPECT_EQ(st.slot_allocations, 4u);
  EXPECT_EQ(st.slot_bytes, 4u * 8 * 24 * 24 * 3);
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

// Held batches are the slots themselves: while the consumer keeps them later batches go to other
// slots (none of the held bytes, labels or indices change, no two held batches share a slot),
// and the pool grows for them, never past max(prefetch, workers + 1) + held_batches.
TEST_F(LoaderTest, HeldBatchesStayUnchangedWhileLaterBatchesArrive) {
  Open(100);
  ASSERT_OK_AND_ASSIGN(auto ref, Loader::Create(reader_.get(), Sampler(), 0, Options(2)));
  ASSERT_OK_AND_ASSIGN(Collected want, Epoch(*ref, 0));
  ASSERT_EQ(want.data.size(), 13u);
  LoaderOptions o = Options(2);
  o.prefetch = 2;
  o.held_batches = 5;
  const int window = 3;  // max(prefetch, workers + 1)
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o));
  ASSERT_OK(l->StartEpoch(0));
  // Batches 0 and 1 are held all epoch; every later one while the next two arrive, released
  // only once the second of those has been handed out. Four are held when the next is asked for,
  // so five are held at that moment: more slots than Next()'s pool of window + 1, whatever the
  // timing. Released slots are reused around the held ones.
  std::vector<Kept> pinned;
  std::deque<Kept> sliding;
  size_t peak = 0;
  for (uint64_t step = 0;; ++step) {
    auto h = l->NextHeld();
    if (absl::IsOutOfRange(h.status())) break;
    ASSERT_OK(h);
    if (sliding.size() == 2) {
      EXPECT_TRUE(Unchanged(sliding.front())) << "at step " << step;
      sliding.pop_front();
    }
    ASSERT_LT(step, want.data.size());
    Kept k = Keep(*std::move(h));
    EXPECT_EQ(k.held.batch.step, step);
    EXPECT_EQ(k.data, want.data[step]) << "step " << step;
    EXPECT_EQ(k.labels, want.labels[step]) << "step " << step;
    EXPECT_EQ(k.indices, want.indices[step]) << "step " << step;
    if (step < 2) {
      pinned.push_back(std::move(k));
    } else {
      sliding.push_back(std::move(k));
    }
    std::set<const uint8_t*> slots;
    for (const Kept& p : pinned) {
      EXPECT_TRUE(Unchanged(p)) << "after step " << step;
      slots.insert(p.held.batch.data);
    }
    for (const Kept& p : sliding) {
      EXPECT_TRUE(Unchanged(p)) << "after step " << step;
      slots.insert(p.held.batch.data);
    }
    const size_t held = pinned.size() + sliding.size();
    peak = std::max(peak, held);
    EXPECT_EQ(slots.size(), held) << "held batches share a slot after step " << step;
    const LoaderStats st = l->stats();
    EXPECT_EQ(st.held, static_cast<int>(held)) << "after step " << step;
    EXPECT_GE(st.slots, static_cast<int>(held)) << "after step " << step;
    EXPECT_LE(st.slots, window + o.held_batches) << "after step " << step;
  }
  EXPECT_EQ(peak, 4u);
  for (const Kept& p : pinned) EXPECT_TRUE(Unchanged(p)) << "at the end of the epoch";
  for (const Kept& p : sliding) EXPECT_TRUE(Unchanged(p)) << "at the end of the epoch";
  const LoaderStats st = l->stats();
  EXPECT_GT(st.slots, window + 1);  // five held at once need more than Next()'s pool
  EXPECT_LE(st.slots, window + o.held_batches);
  EXPECT_EQ(st.slot_allocations, static_cast<uint64_t>(st.slots));
  EXPECT_EQ(st.slot_bytes, static_cast<uint64_t>(st.slots) * 8 * 24 * 24 * 3);
}

// One more than held_batches waits held_timeout and fails ResourceExhausted naming the limit,
// without consuming a batch: after a release the sequence continues exactly where it was. The
// batch Next() hands out counts as one of the limit (and Next() lets go of it itself).
TEST_F(LoaderTest, HoldingMoreThanHeldBatchesFailsUntilOneIsReleased) {
  Open(60);
  ASSERT_OK_AND_ASSIGN(auto ref, Loader::Create(reader_.get(), Sampler(), 0, Options(2)));
  ASSERT_OK_AND_ASSIGN(Collected want, Epoch(*ref, 0));
  ASSERT_EQ(want.indices.size(), 8u);
  LoaderOptions o = Options(2);
  o.held_batches = 2;
  o.held_timeout = std::chrono::milliseconds(50);
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o));
  ASSERT_OK(l->StartEpoch(0));
  std::vector<std::vector<uint64_t>> got;
  std::vector<std::vector<uint8_t>> pixels;
  auto record = [&](const Batch& b) {
    EXPECT_EQ(b.step, got.size());
    got.emplace_back(b.indices, b.indices + b.size);
    pixels.emplace_back(b.data, b.data + b.bytes);
  };
  auto expect_exhausted = [&](const absl::StatusOr<HeldBatch>& r) {
    EXPECT_CODE(r, kResourceExhausted);
    EXPECT_NE(r.status().message().find("held_batches"), absl::string_view::npos) << r.status();
  };
  ASSERT_OK_AND_ASSIGN(HeldBatch a, l->NextHeld());
  record(a.batch);
  ASSERT_OK_AND_ASSIGN(HeldBatch b, l->NextHeld());
  record(b.batch);
  expect_exhausted(l->NextHeld());
  EXPECT_EQ(l->stats().held, 2);
  a.hold.reset();
  EXPECT_EQ(l->stats().held, 1);
  ASSERT_OK_AND_ASSIGN(HeldBatch c, l->NextHeld());  // batch 2: the failure consumed nothing
  record(c.batch);
  expect_exhausted(l->NextHeld());
  b.hold.reset();
  c.hold.reset();
  EXPECT_EQ(l->stats().held, 0);
  ASSERT_OK_AND_ASSIGN(HeldBatch d, l->NextHeld());
  record(d.batch);
  ASSERT_OK_AND_ASSIGN(Batch e, l->Next());  // Next()'s batch is the second hold
  record(e);
  expect_exhausted(l->NextHeld());
  ASSERT_OK_AND_ASSIGN(Batch f, l->Next());  // lets go of e first
  record(f);
  d.hold.reset();
  for (;;) {
    auto n = l->Next();
    if (absl::IsOutOfRange(n.status())) break;
    ASSERT_OK(n);
    record(*n);
  }
  EXPECT_EQ(got, want.indices);  // nothing skipped, nothing twice
  EXPECT_EQ(pixels, want.data);
}

// A hold dropped on another thread wakes a NextHeld waiting for one, whichever comes first: the
// waiter gets the next batch, not ResourceExhausted (held_timeout is long).
TEST_F(LoaderTest, ReleaseOnAnotherThreadWakesAWaitingNextHeld) {
  Open(60);
  ASSERT_OK_AND_ASSIGN(auto ref, Loader::Create(reader_.get(), Sampler(), 0, Options(2)));
  ASSERT_OK_AND_ASSIGN(Collected want, Epoch(*ref, 0));
  LoaderOptions o = Options(2);
  o.held_batches = 2;
  o.held_timeout = std::chrono::seconds(10);
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o));
  ASSERT_OK(l->StartEpoch(0));
  ASSERT_OK_AND_ASSIGN(HeldBatch h0, l->NextHeld());
  ASSERT_OK_AND_ASSIGN(HeldBatch h1, l->NextHeld());
  // The consumer waits on its own thread; this thread drops a hold.
  absl::StatusOr<HeldBatch> h2 = absl::UnknownError("NextHeld not called");
  std::thread consumer([&] { h2 = l->NextHeld(); });
  h0.hold.reset();
  consumer.join();
  ASSERT_OK(h2);
  EXPECT_EQ(h2->batch.step, 2u);
  EXPECT_EQ(std::vector<uint64_t>(h2->batch.indices, h2->batch.indices + h2->batch.size),
            want.indices[2]);
  // And the other way round: the consumer waits here while another thread drops a hold.
  std::thread releaser([&h1] { h1.hold.reset(); });
  absl::StatusOr<HeldBatch> h3 = l->NextHeld();
  releaser.join();
  ASSERT_OK(h3);
  EXPECT_EQ(h3->batch.step, 3u);
  EXPECT_EQ(std::vector<uint64_t>(h3->batch.indices, h3->batch.indices + h3->batch.size),
            want.indices[3]);
  EXPECT_EQ(std::vector<uint8_t>(h3->batch.data, h3->batch.data + h3->batch.bytes), want.data[3]);
  EXPECT_EQ(std::vector<uint8_t>(h2->batch.data, h2->batch.data + h2->batch.bytes), want.data[2]);
}

// A hold outlives the epoch it came from (the next epoch's batches go to other slots) and the
// loader itself, destroyed mid-epoch with workers in flight (under ASan a freed slot would show).
TEST_F(LoaderTest, HeldBatchOutlivesTheEpochAndTheLoader) {
  Open(40);
  ASSERT_OK_AND_ASSIGN(auto ref, Loader::Create(reader_.get(), Sampler(), 0, Options(2)));
  ASSERT_OK_AND_ASSIGN(Collected want0, Epoch(*ref, 0));
  ASSERT_OK_AND_ASSIGN(Collected want1, Epoch(*ref, 1));
  ASSERT_OK_AND_ASSIGN(Collected want2, Epoch(*ref, 2));
  LoaderOptions o = Options(2);
  o.held_batches = 2;
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o));
  ASSERT_OK(l->StartEpoch(0));
  ASSERT_OK_AND_ASSIGN(HeldBatch h0, l->NextHeld());
  Kept k0 = Keep(std::move(h0));
  EXPECT_EQ(k0.data, want0.data[0]);
  EXPECT_EQ(k0.indices, want0.indices[0]);
  ASSERT_OK(l->Next());
  ASSERT_OK(l->StartEpoch(1));  // epoch 0 abandoned with batches in flight; k0 stays held
  EXPECT_EQ(l->stats().held, 1);
  size_t taken = 0;
  for (;; ++taken) {
    auto b = l->Next();
    if (absl::IsOutOfRange(b.status())) break;
    ASSERT_OK(b);
    ASSERT_LT(taken, want1.data.size());
    EXPECT_NE(b->data, k0.held.batch.data) << "epoch 1 step " << taken << " got the held slot";
    EXPECT_EQ(std::vector<uint8_t>(b->data, b->data + b->bytes), want1.data[taken])
        << "epoch 1 step " << taken;
    EXPECT_TRUE(Unchanged(k0)) << "after epoch 1 step " << taken;
  }
  EXPECT_EQ(taken, want1.data.size());
  ASSERT_OK(l->StartEpoch(2));
  ASSERT_OK_AND_ASSIGN(HeldBatch h2, l->NextHeld());
  Kept k2 = Keep(std::move(h2));
  EXPECT_EQ(k2.data, want2.data[0]);
  l.reset();  // mid-epoch, holding two batches
  EXPECT_TRUE(Unchanged(k0)) << "after the loader's destruction";
  EXPECT_TRUE(Unchanged(k2)) << "after the loader's destruction";
  k0.held.hold.reset();
  EXPECT_TRUE(Unchanged(k2)) << "after the other hold was dropped";
  EXPECT_EQ(k2.held.batch.epoch, 2u);
}

// Holding every batch of the epoch is within the limit: asking for one more is the end of the
// epoch (OutOfRange), not a wait for a release that is not needed.
TEST_F(LoaderTest, HoldingTheWholeEpochStillEndsIt) {
  Open(16);  // two batches
  LoaderOptions o = Options(2);
  o.held_batches = 2;
  o.held_timeout = std::chrono::milliseconds(50);
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o));
  ASSERT_OK(l->StartEpoch(0));
  ASSERT_OK_AND_ASSIGN(HeldBatch a, l->NextHeld());
  ASSERT_OK_AND_ASSIGN(HeldBatch b, l->NextHeld());
  auto end = l->NextHeld();
  EXPECT_CODE(end, kOutOfRange);
}

// Next() alone holds one batch at a time: with the default held_batches = 1 it runs epochs as
// before, and a NextHeld while Next()'s batch is out is over the limit.
TEST_F(LoaderTest, NextHoldsOneBatchOfTheLimit) {
  Open(30);
  LoaderOptions o = Options(2);
  o.held_timeout = std::chrono::milliseconds(50);
  ASSERT_EQ(o.held_batches, 1);  // the default
  ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o));
  ASSERT_OK_AND_ASSIGN(Collected c, Epoch(*l, 0));
  EXPECT_EQ(c.data.size(), 4u);
  EXPECT_EQ(l->stats().slots, 4);  // no growth: max(prefetch, workers + 1) + 1
  ASSERT_OK(l->StartEpoch(1));
  ASSERT_OK(l->Next());
  auto over = l->NextHeld();
  EXPECT_CODE(over, kResourceExhausted);
  ASSERT_OK_AND_ASSIGN(Batch b, l->Next());
  EXPECT_EQ(b.step, 1u);
}

TEST_F(LoaderTest, HeldBatchesMustBePositive) {
  Open(10);
  for (int held : {0, -1}) {
    LoaderOptions o = Options(1);
    o.held_batches = held;
    EXPECT_CODE(Loader::Create(reader_.get(), Sampler(), 0, o), kInvalidArgument)
        << "held_batches " << held;
  }
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
