// Host code staging batches on the device, through the device module's real CudaRuntime linked
// against the CUDA stand-in (cuda_standin.cc): pinned host buffers, the loader's copies and the
// waits that order them before a batch is handed out, device buffers that outlive the loader while
// a batch is held, and pinned memory running out. The stand-in's copies take a while, as a DMA
// does, so a batch handed out before its copy finished shows stale device bytes here.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ddpio/device/cuda_runtime.h"
#include "ddpio/loader/host_memory.h"
#include "ddpio/loader/loader.h"
#include "gtest/gtest.h"
#include "tests/gpu_standin/standin.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::loader {
namespace {

using standin::Tally;

std::unique_ptr<device::CudaRuntime> Runtime() {
  std::string why_not;
  auto cuda = device::MakeCudaRuntime(&why_not, 0);
  EXPECT_NE(cuda, nullptr) << why_not;
  return cuda;
}

TEST(HostMemory, WithACudaDeviceItIsPinnedAndFreedByCuda) {
  auto cuda = Runtime();
  ASSERT_NE(cuda, nullptr);
  const Tally before = standin::Counts();
  {
    ASSERT_OK_AND_ASSIGN(HostBuffer b, AllocateHostBuffer(4096, cuda.get()));
    EXPECT_EQ(b.kind(), HostMemoryKind::kCudaPinned);
    EXPECT_EQ(standin::CountsSince(before).host_allocs, 1);
    HostBuffer moved = std::move(b);
    EXPECT_EQ(standin::CountsSince(before).host_frees, 0);
  }
  EXPECT_EQ(standin::CountsSince(before).host_frees, 1);  // exactly once, despite the move
}

class DeviceStaging : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(testing::WriteJpegDataset(dir_.Sub("ds"), 30, 40, 5));
    ASSERT_OK_AND_ASSIGN(reader_, storage::DatasetReader::Open(dir_.Sub("ds")));
    cuda_ = Runtime();
    ASSERT_NE(cuda_, nullptr);
    before_ = standin::Counts();
  }
  void TearDown() override { standin::LimitPinnedAllocations(-1); }
  sampler::SamplerOptions Sampler() {
    sampler::SamplerOptions s;
    s.dataset_size = reader_->size();
    s.num_replicas = 1;
    return s;
  }
  static LoaderOptions Options() {
    LoaderOptions o;
    o.workers = 2;
    o.batch_size = 8;
    o.augment.size = 24;
    o.copy_to_device = true;
    return o;
  }
  // Everything the loader took is given back: memory, events, streams.
  void ExpectAllReturned() {
    const Tally d = standin::CountsSince(before_);
    EXPECT_EQ(d.device_allocs, d.device_frees);
    EXPECT_EQ(d.host_allocs, d.host_frees);
    EXPECT_EQ(d.live_events, 0);
    EXPECT_EQ(d.live_streams, 0);
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::DatasetReader> reader_;
  std::unique_ptr<device::CudaRuntime> cuda_;
  Tally before_;
};

TEST_F(DeviceStaging, CopiesBatchesToTheDeviceAndWaitsBeforeHandingThemOut) {
  {
    ASSERT_OK_AND_ASSIGN(auto l,
                         Loader::Create(reader_.get(), Sampler(), 0, Options(), cuda_.get()));
    EXPECT_EQ(l->stats().memory, HostMemoryKind::kCudaPinned);
    ASSERT_OK(l->StartEpoch(0));
    int batches = 0;
    for (;;) {
      auto b = l->Next();
      if (absl::IsOutOfRange(b.status())) break;
      ASSERT_OK(b);
      ASSERT_NE(b->device_data, nullptr);
      ASSERT_TRUE(standin::IsDeviceMemory(b->device_data, b->bytes));
      // The copy takes 200 µs on the stand-in's stream: equal bytes mean the loader waited.
      EXPECT_EQ(std::memcmp(b->device_data, b->data, b->bytes), 0) << "batch " << batches;
      ++batches;
    }
    EXPECT_EQ(batches, 4);
    const Tally d = standin::CountsSince(before_);
    EXPECT_EQ(d.copies, 4);
    EXPECT_GE(d.event_waits, 4);
    EXPECT_EQ(d.waits_on_unrecorded, 0);  // every wait follows its record
  }
  ExpectAllReturned();
}

// With a device copy the held batch's device buffer outlives the loader, and everything is freed
// once the last hold is dropped (the CudaRuntime outlives the holds).
TEST_F(DeviceStaging, HeldDeviceBatchIsFreedWithItsLastHold) {
  LoaderOptions o = Options();
  o.held_batches = 2;
  {
    HeldBatch held;
    std::vector<uint8_t> data;
    {
      ASSERT_OK_AND_ASSIGN(auto l, Loader::Create(reader_.get(), Sampler(), 0, o, cuda_.get()));
      ASSERT_OK(l->StartEpoch(0));
      ASSERT_OK_AND_ASSIGN(held, l->NextHeld());
      data.assign(held.batch.data, held.batch.data + held.batch.bytes);
      ASSERT_OK(l->Next());
    }  // destroyed mid-epoch
    ASSERT_NE(held.batch.device_data, nullptr);
    EXPECT_EQ(std::memcmp(held.batch.data, data.data(), data.size()), 0);
    EXPECT_EQ(std::memcmp(held.batch.device_data, data.data(), data.size()), 0);
    const Tally d = standin::CountsSince(before_);
    EXPECT_GT(d.device_allocs, d.device_frees);  // the held slot's device buffer is alive
    EXPECT_GT(d.host_allocs, d.host_frees);
  }
  ExpectAllReturned();
}

// Pinned memory running out while the slot pool is built is ResourceExhausted from Create, with
// whatever was allocated given back (the half-built loader is destroyed on the way out).
TEST_F(DeviceStaging, SlotMemoryRunningOutAtCreateIsResourceExhausted) {
  standin::LimitPinnedAllocations(1);
  EXPECT_CODE(Loader::Create(reader_.get(), Sampler(), 0, Options(), cuda_.get()),
              kResourceExhausted);
  EXPECT_EQ(standin::CountsSince(before_).host_allocs, 1);
  ExpectAllReturned();
}

}  // namespace
}  // namespace ddpio::loader
