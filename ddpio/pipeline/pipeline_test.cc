// The trainer's entry point, used as a trainer uses it: real ranks in a real job.
#include "ddpio/pipeline/pipeline.h"

#include <fstream>
#include <set>
#include <sstream>

#include "ddpio/comm/communicator_conformance.h"
#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/remote/upload.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/memory_object_store.h"
#include "tests/support/multiprocess.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

PipelineOptions Small(const std::string& data, int group_size) {
  PipelineOptions o;
  o.data = data;
  o.group_size = group_size;
  o.batch_size = 4;
  o.workers = 1;
  o.image_size = 16;
  return o;
}

// Every index this rank received in one epoch, and checks on the way; -1 on a failed call.
std::vector<int64_t> OneEpoch(Pipeline& p) {
  std::vector<int64_t> seen;
  if (!p.StartEpoch(0).ok()) return {-1};
  for (;;) {
    absl::StatusOr<loader::Batch> b = p.Next();
    if (absl::IsOutOfRange(b.status())) return seen;
    if (!b.ok() || b->size == 0 || b->data == nullptr) return {-1};
    for (uint64_t k = 0; k < b->size; ++k) seen.push_back(static_cast<int64_t>(b->indices[k]));
  }
}

// Four ranks in two groups: only the leaders open the dataset, every rank gets decoded batches,
// and together they see every sample of the epoch exactly once.
TEST(Pipeline, FourRanksInTwoGroupsSeeEverySampleOnceAndOnlyLeadersRead) {
  testing::TempDir dir;
  const std::string data = dir.Sub("db");
  ASSERT_OK(testing::WriteJpegDataset(data, 40, 24));
  comm::RendezvousOptions ro;
  ro.token = "t";
  ro.job_id = "pipeline";
  ro.backend = comm::BackendKind::kGloo;
  auto codes = comm::testing::RunJob(4, ro, [&](comm::Job& job) {
    auto p = Pipeline::Open(job, Small(data, 2));
    if (!p.ok()) return 10;
    if ((*p)->is_leader() != ((*p)->dataset() != nullptr)) return 11;
    if ((*p)->dataset_size() != 40) return 12;
    std::vector<int64_t> seen = OneEpoch(**p);
    std::ofstream out(dir.Sub("rank" + std::to_string(job.info().rank)));
    for (int64_t i : seen) out << i << "\n";
    return 0;
  });
  ASSERT_EQ(codes, (std::vector<int>{0, 0, 0, 0}));
  std::multiset<int64_t> all;
  for (int r = 0; r < 4; ++r) {
    std::ifstream in(dir.Sub("rank" + std::to_string(r)));
    int n = 0;
    for (int64_t i; in >> i; ++n) all.insert(i);
    EXPECT_EQ(n, 10) << "rank " << r;
  }
  std::multiset<int64_t> expected;
  for (int64_t i = 0; i < 40; ++i) expected.insert(i);
  EXPECT_EQ(all, expected);
}

// A dataset in an object store: rank 0 fetches its manifest and index for the whole job and
// broadcasts them; the other ranks — readers and peers alike — open it without asking the store
// for either, and the epoch is every sample once. Each forked rank counts its own requests (its
// copy of the in-memory store).
TEST(Pipeline, OnlyRankZeroFetchesTheIndexOfADatasetInAnObjectStore) {
  testing::TempDir dir;
  const std::string local = dir.Sub("db");
  ASSERT_OK(testing::WriteJpegDataset(local, 40, 24));
  auto store = testing::MemoryStore::Create();
  ASSERT_OK_AND_ASSIGN(auto client, storage::s3::OpenObjectStore(store->Config()));
  ASSERT_OK(client->CreateBucket("ddpio-pipe"));
  ASSERT_OK(storage::remote::Upload(local, "s3://ddpio-pipe/train", store->Config()).status());
  comm::RendezvousOptions ro;
  ro.token = "t";
  ro.job_id = "pipeline-s3-index";
  ro.backend = comm::BackendKind::kGloo;
  auto codes = comm::testing::RunJob(4, ro, [&](comm::Job& job) {
    PipelineOptions o =
        Small("s3://ddpio-pipe/train", 2);  // leaders read, peers identify the dataset
    o.store_overrides.s3 = store->Config();
    const uint64_t index_before = store->requests("GET", storage::remote::kRecordIndexObject);
    const uint64_t manifest_before = store->requests("GET", storage::remote::kRemoteManifestObject);
    auto p = Pipeline::Open(job, o);
    if (!p.ok()) return 10;
    const uint64_t index =
        store->requests("GET", storage::remote::kRecordIndexObject) - index_before;
    const uint64_t manifest =
        store->requests("GET", storage::remote::kRemoteManifestObject) - manifest_before;
    std::vector<int64_t> seen = OneEpoch(**p);
    if (seen.size() != 10) return 11;
    std::ofstream out(dir.Sub("rank" + std::to_string(job.info().rank)));
    for (int64_t i : seen) out << i << "\n";
    if (job.info().rank == 0) return index == 1 && manifest == 1 ? 0 : 12;
    return index == 0 && manifest == 0 ? 0 : 13;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0, 0}))
      << "10 open failed, 11 not its share, 12 rank 0 fetched other than once, 13 another fetched";
  std::multiset<int64_t> all;
  for (int r = 0; r < 4; ++r) {
    std::ifstream in(dir.Sub("rank" + std::to_string(r)));
    for (int64_t i; in >> i;) all.insert(i);
  }
  EXPECT_EQ(all.size(), 40u);
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 40u) << "every sample once";
}

// A rank given another dataset than rank 0 takes part in the broadcast but opens its own: what
// rank 0 fetched is never taken for another URL's.
TEST(Pipeline, ARankGivenAnotherDatasetOpensItsOwnNotRankZerosIndex) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteJpegDataset(dir.Sub("a"), 40, 24));
  ASSERT_OK(testing::WriteJpegDataset(dir.Sub("b"), 20, 24));
  auto store = testing::MemoryStore::Create();
  ASSERT_OK_AND_ASSIGN(auto client, storage::s3::OpenObjectStore(store->Config()));
  ASSERT_OK(client->CreateBucket("ddpio-pipe"));
  ASSERT_OK(storage::remote::Upload(dir.Sub("a"), "s3://ddpio-pipe/a", store->Config()).status());
  ASSERT_OK(storage::remote::Upload(dir.Sub("b"), "s3://ddpio-pipe/b", store->Config()).status());
  comm::RendezvousOptions ro;
  ro.token = "t";
  ro.job_id = "pipeline-s3-two";
  ro.backend = comm::BackendKind::kGloo;
  auto codes = comm::testing::RunJob(2, ro, [&](comm::Job& job) {
    const bool first = job.info().rank == 0;
    PipelineOptions o = Small(first ? "s3://ddpio-pipe/a" : "s3://ddpio-pipe/b", 1);
    o.store_overrides.s3 = store->Config();
    const uint64_t before = store->requests("GET", storage::remote::kRecordIndexObject);
    auto p = Pipeline::Open(job, o);
    if (!p.ok()) return 10;
    if ((*p)->dataset_size() != (first ? 40u : 20u)) return 11;
    const uint64_t index = store->requests("GET", storage::remote::kRecordIndexObject) - before;
    return index == 1 ? 0 : 12;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}))
      << "10 open failed, 11 another dataset's size, 12 not its own index fetched once";
}

// Rank 0 cannot fetch the index (no dataset at the URL): every rank fails with rank 0's words,
// at once, not after the timeout.
TEST(Pipeline, WhenRankZeroCannotFetchTheIndexEveryRankSaysWhy) {
  auto store = testing::MemoryStore::Create();
  ASSERT_OK_AND_ASSIGN(auto client, storage::s3::OpenObjectStore(store->Config()));
  ASSERT_OK(client->CreateBucket("ddpio-pipe"));
  comm::RendezvousOptions ro;
  ro.token = "t";
  ro.job_id = "pipeline-s3-missing";
  ro.backend = comm::BackendKind::kGloo;
  auto codes = comm::testing::RunJob(2, ro, [&](comm::Job& job) {
    PipelineOptions o = Small("s3://ddpio-pipe/nothing", 1);
    o.store_overrides.s3 = store->Config();
    auto p = Pipeline::Open(job, o);
    job.MarkFailed();
    if (p.ok()) return 10;
    if (!absl::IsNotFound(p.status())) return 11;
    const bool says = p.status().message().find("no dataset at s3://ddpio-pipe/nothing") !=
                      std::string_view::npos;
    if (!says) return 12;
    const bool named = p.status().message().find("rank 0") != std::string_view::npos;
    return named == (job.info().rank != 0) ? 0 : 13;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}))
      << "10 opened, 11 another error, 12 not the store's words, 13 rank 0 not named on rank 1";
}

// A leader that cannot open the dataset (Open on a job the caller joined skips Check): its peer
// learns it from the group at once — an error, not the rendezvous timeout (60 s here).
TEST(Pipeline, APeerFailsPromptlyWhenItsLeaderCannotOpenTheDataset) {
  testing::TempDir dir;
  comm::RendezvousOptions ro;
  ro.token = "t";
  ro.job_id = "pipeline-missing";
  ro.backend = comm::BackendKind::kGloo;
  auto codes = comm::testing::RunJob(2, ro, [&](comm::Job& job) {
    auto p = Pipeline::Open(job, Small(dir.Sub("missing"), 2));
    if (p.ok()) return 10;
    job.MarkFailed();  // as a trainer leaving on an error does
    if (job.info().rank == 0) return absl::IsNotFound(p.status()) ? 0 : 11;
    return absl::IsDeadlineExceeded(p.status()) ? 12 : 0;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0}))
      << "10 opened, 11 leader's error, 12 the peer waited out the timeout";
}

// Started alone (no launcher): Open joins a one-rank job by itself. After Close, the pipeline
// refuses to go on instead of crashing, and still tells what it did.
TEST(Pipeline, AloneItJoinsByItselfAndAClosedPipelineRefuses) {
  testing::TempDir dir;
  const std::string data = dir.Sub("db");
  ASSERT_OK(testing::WriteJpegDataset(data, 12, 24));
  auto codes = testing::RunForked(1, [&](int) {
    for (const char* v :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})
      unsetenv(v);
    const auto before_open = std::chrono::steady_clock::now();
    auto p = Pipeline::Open(Small(data, 1));
    if (!p.ok()) return 10;
    if ((*p)->rank() != 0 || !(*p)->is_leader()) return 11;
    if ((*p)->counters().time_to_first_batch_ns != 0) return 18;  // no batch yet
    if (OneEpoch(**p).size() != 12) return 12;
    // Time to first batch: set by the first batch, within the time since opening began, and
    // not moved by the later ones.
    const uint64_t first = (*p)->counters().time_to_first_batch_ns;
    const auto since_open = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - before_open);
    if (first == 0 || first > static_cast<uint64_t>(since_open.count())) return 19;
    if (OneEpoch(**p).size() != 12 || (*p)->counters().time_to_first_batch_ns != first) return 20;
    const uint64_t batches = (*p)->NumBatches();
    const uint64_t records = (*p)->counters().records_read;
    (*p)->Close();
    (*p)->Close();  // twice is fine
    if (!absl::IsFailedPrecondition((*p)->StartEpoch(1))) return 13;
    if (!absl::IsFailedPrecondition((*p)->Next().status())) return 14;
    if (!absl::IsFailedPrecondition((*p)->BatchesInEpoch(1).status())) return 15;
    if ((*p)->NumBatches() != batches || (*p)->counters().records_read != records ||
        records != 24)  // two epochs
      return 16;
    if ((*p)->dataset_size() != 12) return 17;
    return 0;
  });
  EXPECT_EQ(codes[0], 0)
      << "10 open, 11 rank, 12 epoch, 13-15 not refused after Close, 16-17 values lost, 18-20 "
         "time to first batch";
}

// What can be known before joining fails before joining, on the rank that knows it.
TEST(Pipeline, CheckRefusesABadLayoutAndAMissingDatasetOnReadersOnly) {
  testing::TempDir dir;
  comm::RankInfo leader;  // rank 0 of 4
  leader.world_size = 4;
  comm::RankInfo peer = leader;
  peer.rank = 1;
  EXPECT_CODE(Pipeline::Check(leader, Small(dir.Sub("db"), 3)),
              kInvalidArgument);  // 4 ranks, groups of 3
  EXPECT_CODE(Pipeline::Check(leader, Small(dir.Sub("missing"), 2)), kNotFound);
  EXPECT_OK(Pipeline::Check(peer, Small(dir.Sub("missing"), 2)));  // a peer never opens it
  PipelineOptions every = Small(dir.Sub("missing"), 2);
  every.readers = broadcast::FeedReaders::kAll;
  EXPECT_CODE(Pipeline::Check(peer, every), kNotFound);  // ... unless every rank reads
}

}  // namespace
}  // namespace ddpio
