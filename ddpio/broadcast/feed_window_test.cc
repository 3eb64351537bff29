#include "ddpio/broadcast/feed_window.h"

#include <thread>

#include "ddpio/loader/loader.h"
#include "ddpio/storage/record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"

namespace ddpio::broadcast {
namespace {

using ::testing::HasSubstr;

FeedItem Item(uint64_t epoch, uint64_t step, std::vector<uint64_t> indices) {
  FeedItem item;
  item.header.epoch = epoch;
  item.header.step = step;
  for (uint64_t i : indices) {
    std::string bytes;
    EXPECT_OK(storage::EncodeRecord(ddpio::testing::MakeRecord(i).view(), &bytes));
    item.header.indices.push_back(i);
    item.header.labels.push_back(0);
    item.header.valid.push_back(1);
    item.header.sizes.push_back(bytes.size());
    item.payload.insert(item.payload.end(), bytes.begin(), bytes.end());
  }
  item.header.payload_bytes = item.payload.size();
  return item;
}

TEST(FeedWindow, StepsAreTakenInAnyOrderThenTheEndIsDataLoss) {
  std::atomic<bool> stop{false};
  FeedWindow w("the leader", 4);
  w.Reset(3);
  w.Push(Item(3, 0, {5}));
  w.Push(Item(3, 1, {6, 7}));
  w.End();
  ASSERT_OK_AND_ASSIGN(FeedItem one, w.Take(1, stop));
  EXPECT_EQ(one.header.indices, (std::vector<uint64_t>{6, 7}));
  ASSERT_OK_AND_ASSIGN(auto zero, w.Fetch(3, 0, stop));
  ASSERT_EQ(zero->records.size(), 1u);
  storage::RecordView view;
  EXPECT_OK(storage::DecodeRecord(zero->records[0], true, &view));
  EXPECT_EQ(view.label, ddpio::testing::MakeRecord(5).label);
  auto missing = w.Take(2, stop);
  EXPECT_CODE(missing, kDataLoss);
  EXPECT_THAT(missing.status().message(), HasSubstr("the leader"));
}

TEST(FeedWindow, AnErrorComesAfterTheBatchesBeforeIt) {
  std::atomic<bool> stop{false};
  FeedWindow w("the leader", 4);
  w.Reset(0);
  w.Push(Item(0, 0, {1}));
  w.SetError(absl::UnavailableError("gone"));
  EXPECT_OK(w.Take(0, stop).status());
  EXPECT_CODE(w.Take(1, stop), kUnavailable);
  w.SetError(absl::DataLossError("second"));  // the first error stays
  EXPECT_CODE(w.Take(1, stop), kUnavailable);
}

TEST(FeedWindow, AnotherEpochsBatchIsOutOfStep) {
  std::atomic<bool> stop{false};
  FeedWindow w("the leader", 2);
  w.Reset(1);
  w.Push(Item(0, 0, {1}));
  EXPECT_CODE(w.Fetch(1, 0, stop), kDataLoss);
}

// A full window blocks its producer until a step is taken; Drain releases it and discards.
TEST(FeedWindow, AFullWindowHoldsTheProducerUntilTakenOrDrained) {
  std::atomic<bool> stop{false};
  FeedWindow w("the leader", 1);
  w.Reset(0);
  w.Push(Item(0, 0, {1}));
  std::thread producer([&] {
    w.Push(Item(0, 1, {2}));  // waits for room
    w.Push(Item(0, 2, {3}));  // waits again; the drain below discards it
  });
  ASSERT_OK(w.Take(0, stop).status());
  ASSERT_OK_AND_ASSIGN(FeedItem one, w.Take(1, stop));  // arrives once there was room
  EXPECT_EQ(one.header.indices[0], 2u);
  w.Drain();
  producer.join();
  EXPECT_CODE(w.Take(2, stop), kCancelled);
}

TEST(FeedWindow, StopCancelsAWaitingTake) {
  std::atomic<bool> stop{false};
  FeedWindow w("the leader", 1);
  w.Reset(0);
  absl::Status got;
  std::thread consumer([&] { got = w.Take(0, stop).status(); });
  stop = true;
  w.Wake();
  consumer.join();
  EXPECT_EQ(got.code(), absl::StatusCode::kCancelled);
}

// A loader fed by a window checks every index against its own sampler: a source out of step
// is DataLoss naming both, never a wrong batch.
TEST(FeedWindow, ALoaderRefusesRecordsItsSamplerDoesNotExpect) {
  FeedWindow w("the leader (rank 0)", 2);
  sampler::SamplerOptions so;
  so.dataset_size = 10;
  so.num_replicas = 2;
  loader::LoaderOptions lo;
  lo.batch_size = 2;
  lo.workers = 1;
  lo.augment.size = 8;
  ASSERT_OK_AND_ASSIGN(auto l, loader::Loader::Create(&w, so, 1, lo));
  w.Reset(0);
  ASSERT_OK(l->StartEpoch(0));
  const uint64_t first = l->plan()->IndexAt(1, 0);
  w.Push(Item(
      0, 0,
      {first, (first + 1) % 10 == l->plan()->IndexAt(1, 1) ? (first + 2) % 10 : (first + 1) % 10}));
  auto b = l->Next();
  EXPECT_CODE(b, kDataLoss);
  EXPECT_THAT(b.status().message(), HasSubstr("out of step with the leader (rank 0)"));
}

}  // namespace
}  // namespace ddpio::broadcast
