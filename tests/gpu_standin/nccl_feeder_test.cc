// The group feeder over NCCL, linked against the stand-in (nccl_standin.cc, cuda_standin.cc): four
// real rank processes whose "device" buffers are host memory, streams are in-order threads and the
// NCCL calls run over Gloo on loopback. Decoded batches must arrive on every rank's device exactly
// as the Gloo feeder delivers them in host memory; a dead peer, a bad record and a stop mid-epoch
// must behave as they do over Gloo.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "ddpio/broadcast/group_feeder.h"
#include "ddpio/comm/communicator_conformance.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/storage/dataset_reader.h"
#include "gtest/gtest.h"
#include "tests/gpu_standin/standin.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/feeder_checks.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::broadcast {
namespace {

constexpr int kWorld = ddpio::testing::kFeedWorld;
using ddpio::testing::FeedSetup;
using ddpio::testing::JoinFeeder;

FeederOptions Decoded() {
  FeederOptions o;
  o.sampler.seed = 7;
  o.payload = FeedPayload::kDecoded;
  o.loader.batch_size = 4;
  o.loader.workers = 2;
  o.loader.augment.size = 24;
  o.loader.seed = 3;
  o.timeout = std::chrono::seconds(20);
  return o;
}

using ddpio::testing::DescribeBatch;
using ddpio::testing::ReadFileText;

// Runs `body` on 4 ranks over `backend` (nccl: the stand-in with 2 "devices" per host).
std::vector<int> RunRanks(comm::BackendKind backend, const std::string& job_id,
                          const std::function<int(comm::Job&)>& body) {
  ::setenv("DDPIO_NCCL_STANDIN_DEVICES", "2", 1);  // inherited by the forked ranks
  comm::RendezvousOptions o;
  o.token = "feed";
  o.job_id = job_id;
  o.backend = backend;
  auto codes = comm::testing::RunJob(kWorld, o, [&](comm::Job& job) {
    const bool nccl = job.world().backend() == "nccl";
    if (nccl != (backend == comm::BackendKind::kNccl)) return 50;
    return body(job);
  });
  ::unsetenv("DDPIO_NCCL_STANDIN_DEVICES");
  return codes;
}

// Feeds `epochs` epochs and writes what this rank got to <out>/<tag>.<rank>. Over NCCL every
// batch must be on the device only.
int FeedAndDescribeBatch(comm::Job& job, const FeedSetup& s, const std::string& tag) {
  const int rank = job.info().rank;
  std::unique_ptr<storage::DatasetReader> reader;
  auto feeder = JoinFeeder(job, s, s.options, &reader);
  if (!feeder.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, feeder.status().ToString().c_str());
    return 5;
  }
  const bool device = job.world().backend() == "nccl";
  std::string samples;
  for (int e = 0; e < s.epochs; ++e) {
    if (!(*feeder)->StartEpoch(e).ok()) return 6;
    for (;;) {
      auto b = (*feeder)->Next();
      if (absl::IsOutOfRange(b.status())) break;
      if (!b.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", rank, b.status().ToString().c_str());
        return 7;
      }
      if (device != (b->device_data != nullptr) || device != (b->data == nullptr)) return 8;
      samples += DescribeBatch(*b, (*feeder)->sample_bytes());
    }
  }
  const FeederCounters c = (*feeder)->counters();
  const bool leader = (*feeder)->is_leader();
  if (s.group_size > 1 && (leader ? c.bytes_sent == 0 : c.bytes_received == 0))
    return 9;  // nothing moved
  std::ofstream(absl::StrCat(s.out, "/", tag, ".", rank)) << samples;
  return 0;
}

struct Case {
  FeedMode mode;
  int group_size;
  comm::LayoutKind layout;
  sampler::Padding padding;
};

class NcclFeeder : public ::testing::TestWithParam<Case> {};

// Shard and replicate, groups of 2 and 4, both layouts, padded and uneven streams: every rank
// gets over NCCL exactly the batches (indices, labels, validity, pixels) the Gloo feeder gives it.
TEST_P(NcclFeeder, DecodedBatchesAreByteIdenticalToTheGlooFeeders) {
  const Case c = GetParam();
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  s.out = dir.path();
  ASSERT_OK(
      ddpio::testing::WriteJpegDataset(s.data, 43, 30));  // 43: uneven shares, short last batches
  s.options = Decoded();
  s.options.mode = c.mode;
  s.options.sampler.padding = c.padding;
  s.group_size = c.group_size;
  s.layout = c.layout;
  EXPECT_EQ(RunRanks(comm::BackendKind::kNccl, "nccl",
                     [&](comm::Job& job) { return FeedAndDescribeBatch(job, s, "nccl"); }),
            std::vector<int>(kWorld, 0));
  EXPECT_EQ(RunRanks(comm::BackendKind::kGloo, "gloo",
                     [&](comm::Job& job) { return FeedAndDescribeBatch(job, s, "gloo"); }),
            std::vector<int>(kWorld, 0));
  for (int r = 0; r < kWorld; ++r) {
    const std::string nccl = ReadFileText(absl::StrCat(s.out, "/nccl.", r));
    EXPECT_FALSE(nccl.empty()) << "rank " << r;
    EXPECT_EQ(nccl, ReadFileText(absl::StrCat(s.out, "/gloo.", r))) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ModesGroupsLayouts, NcclFeeder,
    ::testing::Values(
        Case{FeedMode::kShard, 2, comm::LayoutKind::kContiguous, sampler::Padding::kPad},
        Case{FeedMode::kShard, 4, comm::LayoutKind::kStrided, sampler::Padding::kNone},
        Case{FeedMode::kReplicate, 2, comm::LayoutKind::kStrided, sampler::Padding::kPad},
        Case{FeedMode::kReplicate, 4, comm::LayoutKind::kContiguous, sampler::Padding::kNone}),
    [](const auto& info) {
      return FeedModeName(info.param.mode) + "_groups_of_" + std::to_string(info.param.group_size) +
             "_" + comm::LayoutKindName(info.param.layout) + "_" +
             sampler::PaddingName(info.param.padding);
    });

// A peer that dies mid-epoch: every other member fails with Unavailable well within the timeout.
// The stand-in's broadcast (gloo::broadcast's tree) almost always sees the peer go at once; on a
// loaded machine it has missed it (1 run in 30 with two copies at once, and in two full test
// runs, replicate mode): the survivors' broadcast then waits out the backend's timeout and ends
// with DeadlineExceeded naming the collective — as real NCCL, which need not notice a dead peer
// at all, relies on that timeout. Either way every survivor ends, with a clear error, in bounded
// time; a hang, another error or an error past those bounds fails.
TEST(NcclFeederFailures, KilledPeerGivesUnavailableOnTheOthers) {
  for (FeedMode mode : {FeedMode::kShard, FeedMode::kReplicate}) {
    ddpio::testing::TempDir dir;
    FeedSetup s;
    s.data = dir.Sub("data");
    ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 80, 30));
    s.options = Decoded();
    s.options.mode = mode;
    s.options.timeout = std::chrono::seconds(30);
    s.group_size = 4;
    auto codes = RunRanks(comm::BackendKind::kNccl, "killed", [&](comm::Job& job) {
      const int rank = job.info().rank;
      std::unique_ptr<storage::DatasetReader> reader;
      auto feeder = JoinFeeder(job, s, s.options, &reader);
      if (!feeder.ok()) return 4;
      ddpio::testing::FeedUntilAPeerDies(
          **feeder, rank, 2, std::chrono::seconds(15),
          std::chrono::duration_cast<std::chrono::seconds>(s.options.timeout) +
              std::chrono::seconds(10));
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0, 42, 0})) << FeedModeName(mode);
  }
}

// A record that fails its checksum under the `fail` policy: the leader's error travels over
// NCCL (its header slot, then the error text) and every member reports it as DataLoss naming it.
TEST(NcclFeederFailures, ACorruptRecordIsTheLeadersErrorOnEveryMember) {
  for (FeedMode mode : {FeedMode::kShard, FeedMode::kReplicate}) {
    ddpio::testing::TempDir dir;
    FeedSetup s;
    s.data = dir.Sub("data");
    ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 40, 30));
    ASSERT_OK(ddpio::testing::DamageRecordChecksum(s.data, 17));  // its CRC no longer matches
    s.options = Decoded();
    s.options.mode = mode;
    s.group_size = 4;
    auto codes = RunRanks(comm::BackendKind::kNccl, "corrupt", [&](comm::Job& job) {
      std::unique_ptr<storage::DatasetReader> reader;
      auto feeder = JoinFeeder(job, s, s.options, &reader);
      if (!feeder.ok()) return 4;
      return ddpio::testing::ExpectDataLossNaming(**feeder, job.info().rank, "0000000000000011");
    });
    EXPECT_EQ(codes, std::vector<int>(kWorld, 0)) << FeedModeName(mode);
  }
}

// Lock-step over NCCL: every rank stops epoch 0 after 2 batches and resumes it from the saved
// position, getting exactly the rest (the same as the Gloo feeder); epoch 1 ends by destroying
// the feeder mid-epoch, and nobody hangs.
TEST(NcclFeederFailures, StopResumeAndShutdownMidEpochStayInStep) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  s.out = dir.path();
  ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 60, 30));
  s.options = Decoded();
  s.group_size = 4;
  auto body = [&](const std::string& tag) {
    return [&, tag](comm::Job& job) {
      std::unique_ptr<storage::DatasetReader> reader;
      auto feeder = JoinFeeder(job, s, s.options, &reader);
      if (!feeder.ok()) return 4;
      std::string samples;
      if (!(*feeder)->StartEpoch(0).ok()) return 5;
      for (int n = 0; n < 2; ++n) {
        auto b = (*feeder)->Next();
        if (!b.ok()) return 6;
        samples += DescribeBatch(*b, (*feeder)->sample_bytes());
      }
      const uint64_t resume = (*feeder)->ResumePosition();
      if (!(*feeder)->StartEpoch(0, resume).ok()) return 7;
      for (auto b = (*feeder)->Next(); b.ok() || !absl::IsOutOfRange(b.status());
           b = (*feeder)->Next()) {
        if (!b.ok()) return 8;
        samples += DescribeBatch(*b, (*feeder)->sample_bytes());
      }
      if (!(*feeder)->StartEpoch(1).ok() || !(*feeder)->Next().ok()) return 9;
      feeder->reset();  // mid-epoch
      std::ofstream(absl::StrCat(s.out, "/", tag, ".", job.info().rank)) << samples;
      return 0;
    };
  };
  EXPECT_EQ(RunRanks(comm::BackendKind::kNccl, "resume-nccl", body("nccl")),
            std::vector<int>(kWorld, 0));
  EXPECT_EQ(RunRanks(comm::BackendKind::kGloo, "resume-gloo", body("gloo")),
            std::vector<int>(kWorld, 0));
  for (int r = 0; r < kWorld; ++r) {
    const std::string nccl = ReadFileText(absl::StrCat(s.out, "/nccl.", r));
    EXPECT_FALSE(nccl.empty()) << "rank " << r;
    EXPECT_EQ(nccl, ReadFileText(absl::StrCat(s.out, "/gloo.", r))) << "rank " << r;
  }
}

// Encoded records are decoded on each member's CPU: a device-memory group refuses them, saying
// what to do instead.
TEST(NcclFeederFailures, EncodedPayloadIsRefusedOnADeviceMemoryGroup) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 20, 30));
  s.options = Decoded();
  s.options.payload = FeedPayload::kEncoded;
  auto codes = RunRanks(comm::BackendKind::kNccl, "encoded", [&](comm::Job& job) {
    std::unique_ptr<storage::DatasetReader> reader;
    auto feeder = JoinFeeder(job, s, s.options, &reader);
    if (feeder.ok()) return 1;
    std::fprintf(stderr, "rank %d: %s\n", job.info().rank, feeder.status().ToString().c_str());
    return absl::IsInvalidArgument(feeder.status()) &&
                   feeder.status().message().find("gloo") != absl::string_view::npos
               ? 0
               : 2;
  });
  EXPECT_EQ(codes, std::vector<int>(kWorld, 0));
}

// Over Gloo with a CUDA runtime (the real one, over the stand-in) every rank's loader stages its
// batches on the device — peers too, from the records they receive: the device bytes are the
// batch's (the stand-in's copies take a while, so a batch handed out early shows stale bytes),
// each copy recorded and waited for before the batch is handed out, and every device buffer,
// event and stream is given back with the feeder.
TEST(DeviceStagedFeeder, BatchesAreStagedOnTheDeviceOfEveryRank) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 45, 30));  // 3 batches per rank
  s.options = Decoded();
  s.options.payload = FeedPayload::kEncoded;
  s.options.loader.copy_to_device = true;
  auto codes = RunRanks(comm::BackendKind::kGloo, "device", [&](comm::Job& job) {
    std::string why_not;
    auto cuda = device::MakeCudaRuntime(&why_not, job.info().local_rank % 2);
    if (cuda == nullptr) return 3;
    const standin::Tally before = standin::Counts();
    FeederOptions o = s.options;
    o.cuda = cuda.get();
    std::unique_ptr<storage::DatasetReader> reader;
    int batches = 0;
    {
      auto feeder = JoinFeeder(job, s, o, &reader);
      if (!feeder.ok() || !(*feeder)->StartEpoch(0).ok()) return 4;
      for (;;) {
        auto b = (*feeder)->Next();
        if (absl::IsOutOfRange(b.status())) break;
        if (!b.ok()) return 5;
        if (b->device_data == nullptr || !standin::IsDeviceMemory(b->device_data, b->bytes) ||
            std::memcmp(b->device_data, b->data, b->bytes) != 0)
          return 6;
        ++batches;
      }
      const standin::Tally d = standin::CountsSince(before);
      if (d.copies != batches || d.event_waits < batches || d.waits_on_unrecorded != 0) return 7;
    }
    const standin::Tally d = standin::CountsSince(before);
    if (d.device_allocs == 0 || d.device_allocs != d.device_frees || d.live_events != 0 ||
        d.host_allocs != d.host_frees)
      return 8;
    return batches == 3 ? 0 : 9;
  });
  EXPECT_EQ(codes, std::vector<int>(kWorld, 0));
}

// Decoded batches arrive ready in host buffers: asking for device copies there is refused.
TEST(DeviceStagedFeeder, DeviceCopiesNeedTheEncodedPayload) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 10, 30));
  auto codes = RunRanks(comm::BackendKind::kGloo, "device-decoded", [&](comm::Job& job) {
    std::string why_not;
    auto cuda = device::MakeCudaRuntime(&why_not, 0);
    FeederOptions o = Decoded();
    o.loader.copy_to_device = true;
    o.cuda = cuda.get();
    std::unique_ptr<storage::DatasetReader> reader;
    auto feeder = JoinFeeder(job, s, o, &reader);
    return feeder.ok() ? 0 : absl::IsInvalidArgument(feeder.status()) ? 1 : 2;
  });
  EXPECT_EQ(codes, std::vector<int>(kWorld, 1));
}

}  // namespace
}  // namespace ddpio::broadcast
