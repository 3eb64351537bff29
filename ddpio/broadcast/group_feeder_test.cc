// The group feeder with real rank processes over Gloo on loopback: every mode x payload x
// layout gives each rank exactly what it would have got reading for itself; only leaders read;
// the wire carries the peers' share once; errors reach the whole group; nothing hangs.
#include "ddpio/broadcast/group_feeder.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/communicator_conformance.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/feeder_checks.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::broadcast {
namespace {

constexpr int kWorld = ddpio::testing::kFeedWorld;
using ddpio::testing::FeedSetup;
using ddpio::testing::JoinFeeder;

FeederOptions SmallOptions() {
  FeederOptions o;
  o.sampler.seed = 11;
  o.loader.batch_size = 4;
  o.loader.workers = 2;
  o.loader.augment.size = 24;
  o.loader.seed = 5;
  o.timeout = std::chrono::seconds(20);
  return o;
}

using ddpio::testing::DescribeBatch;
using ddpio::testing::ReadFileText;

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The child: join, feed `epochs` epochs, write the samples and the counters. Exit code 0 = ran.
int FeedRank(comm::Job& job, const FeedSetup& s) {
  const int rank = job.info().rank;
  std::unique_ptr<storage::DatasetReader> reader;
  auto feeder = JoinFeeder(job, s, s.options, &reader);
  if (!feeder.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, feeder.status().ToString().c_str());
    return 5;
  }
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
      samples += DescribeBatch(*b, (*feeder)->sample_bytes());
    }
  }
  const FeederCounters c = (*feeder)->counters();
  WriteFile(absl::StrCat(s.out, "/samples.", rank), samples);
  WriteFile(
      absl::StrCat(s.out, "/counters.", rank),
      absl::StrCat(c.records_read, " ", c.bytes_read, " ", c.bytes_sent, " ", c.bytes_received, " ",
                   c.messages_sent, " ", c.direct ? "direct" : "fed", " ", c.decode_threads));
  return 0;
}

std::vector<int> RunFeed(const FeedSetup& s, const std::string& job_id,
                         const std::function<int(comm::Job&)>& body = nullptr) {
  comm::RendezvousOptions o;
  o.token = "feed";
  o.job_id = job_id;
  o.backend = comm::BackendKind::kGloo;
  return comm::testing::RunJob(
      kWorld, o, body ? body : [&](comm::Job& job) { return FeedRank(job, s); });
}

// What `stream_rank` gets reading for itself with a plain Loader, described like the feeder's.
std::string Reference(const FeedSetup& s, int stream_rank, uint64_t* records) {
  auto reader = storage::DatasetReader::Open(s.data, {});
  EXPECT_OK(reader.status());
  sampler::SamplerOptions so = s.options.sampler;
  so.dataset_size = (*reader)->size();
  so.num_replicas = kWorld;
  if (s.options.mode == FeedMode::kReplicate) {
    so = StreamSamplerOptions(so, FeedMode::kReplicate,
                              *comm::GroupLayout::Make(kWorld, s.group_size, s.layout));
  }
  auto loader = loader::Loader::Create(reader->get(), so, stream_rank, s.options.loader);
  EXPECT_OK(loader.status());
  std::string out;
  for (int e = 0; e < s.epochs; ++e) {
    EXPECT_OK((*loader)->StartEpoch(e));
    for (auto b = (*loader)->Next(); b.ok(); b = (*loader)->Next())
      out += DescribeBatch(*b, (*loader)->sample_bytes());
  }
  *records = (*loader)->stats().images;
  return out;
}

// The samples each rank wrote (FeedRank's samples.<rank>) are what it reads for itself.
void ExpectEveryRankGotItsOwnStream(const FeedSetup& s, const std::string& what) {
  for (int r = 0; r < kWorld; ++r) {
    uint64_t records = 0;
    EXPECT_EQ(ReadFileText(absl::StrCat(s.out, "/samples.", r)), Reference(s, r, &records))
        << what << " rank " << r;
  }
}

class FeedMatrix
    : public ::testing::TestWithParam<std::tuple<FeedMode, FeedPayload, comm::LayoutKind>> {};

// Shard: rank r's samples (indices, labels, validity, pixels) equal reading for itself with the
// world's sampler. Replicate: equal to reading the group's stream, hence identical in a group.
// Only leaders read, each record once; in shard + encoded the wire carries the peers' stored
// records (plus headers), not G copies.
TEST_P(FeedMatrix, EveryRankGetsWhatItWouldHaveReadForItself) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  s.out = dir.path();
  ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 45, 30));
  s.options = SmallOptions();
  std::tie(s.options.mode, s.options.payload, s.layout) = GetParam();
  const auto codes = RunFeed(s, "matrix");
  ASSERT_EQ(codes, std::vector<int>(kWorld, 0));
  auto layout = *comm::GroupLayout::Make(kWorld, s.group_size, s.layout);
  const bool shard = s.options.mode == FeedMode::kShard;
  for (int r = 0; r < kWorld; ++r) {
    uint64_t records = 0;
    const int stream = shard ? r : layout.group_rank(r);
    const std::string want = Reference(s, stream, &records);
    EXPECT_EQ(ReadFileText(absl::StrCat(s.out, "/samples.", r)), want) << "rank " << r;
    uint64_t read = 0, bytes_read = 0, sent = 0, received = 0, messages = 0;
    std::istringstream(ReadFileText(absl::StrCat(s.out, "/counters.", r))) >> read >> bytes_read >>
        sent >> received >> messages;
    if (!layout.is_leader(r)) {
      EXPECT_EQ(read, 0u) << "peer " << r << " read storage";
      EXPECT_GT(received, 0u);
      continue;
    }
    // The leader read each sample of the group's streams once (decoded: its loaders may read a
    // little ahead of the end of an epoch, never more than an epoch's worth per stream).
    uint64_t group_records = 0;
    if (shard) {
      for (int m : layout.members(r)) Reference(s, m, &records), group_records += records;
    } else {
      group_records = records;
    }
    EXPECT_EQ(read, group_records) << "leader " << r;
    if (shard && s.options.payload == FeedPayload::kEncoded) {
      // Bytes sent = the peers' stored records + per-message headers (small next to the data).
      uint64_t peer_stored = 0;
      auto reader = *storage::DatasetReader::Open(s.data, {});
      auto txn = *reader->BeginRead();
      sampler::SamplerOptions so = s.options.sampler;
      so.dataset_size = reader->size();
      so.num_replicas = kWorld;
      auto smp = *sampler::DistributedSampler::Create(so);
      for (int e = 0; e < s.epochs; ++e) {
        auto plan = *smp.Plan(e);
        for (int m : layout.members(r)) {
          if (m == r) continue;
          for (uint64_t j = 0; j < plan.NumSamples(m); ++j) {
            absl::Span<const uint8_t> stored;
            ASSERT_OK(txn.Get(plan.IndexAt(m, j), &stored).status());
            peer_stored += stored.size();
          }
        }
      }
      EXPECT_GE(sent, peer_stored);
      EXPECT_LE(sent, peer_stored + messages * 256) << "more than the peers' share on the wire";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    ModesPayloadsLayouts, FeedMatrix,
    ::testing::Combine(::testing::Values(FeedMode::kShard, FeedMode::kReplicate),
                       ::testing::Values(FeedPayload::kEncoded, FeedPayload::kDecoded),
                       ::testing::Values(comm::LayoutKind::kContiguous,
                                         comm::LayoutKind::kStrided)),
    [](const auto& info) {
      return FeedModeName(std::get<0>(info.param)) + "_" +
             FeedPayloadName(std::get<1>(info.param)) + "_" +
             comm::LayoutKindName(std::get<2>(info.param));
    });

// Replicate in one group of 4: the chain (leader -> 1 -> 2 -> 3, each member forwarding as data
// arrives), the star (the leader sends each member a copy) and every member reading for itself
// all give every member the group's stream. What moves: in the chain every member but the last
// sends on exactly what it received, and the leader sends one copy; in the star the leader
// sends three; with every member reading nothing moves and each reads the whole stream.
TEST(GroupFeeder, ChainStarAndEveryMemberReadingGiveTheGroupsStream) {
  struct Case {
    FeedRelay relay;
    FeedReaders readers;
    FeedPayload payload;
  };
  for (const Case& c : {Case{FeedRelay::kChain, FeedReaders::kLeader, FeedPayload::kEncoded},
                        Case{FeedRelay::kChain, FeedReaders::kLeader, FeedPayload::kDecoded},
                        Case{FeedRelay::kStar, FeedReaders::kLeader, FeedPayload::kEncoded},
                        Case{FeedRelay::kChain, FeedReaders::kAll, FeedPayload::kEncoded}}) {
    const std::string name = absl::StrCat(FeedRelayName(c.relay), "_", FeedReadersName(c.readers),
                                          "_", FeedPayloadName(c.payload));
    ddpio::testing::TempDir dir;
    FeedSetup s;
    s.data = dir.Sub("data");
    s.out = dir.path();
    ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 50, 30));
    s.options = SmallOptions();
    s.options.mode = FeedMode::kReplicate;
    s.options.payload = c.payload;
    s.options.relay = c.relay;
    s.options.readers = c.readers;
    s.options.read_ahead = 3;  // a window smaller than a step: the read-ahead crosses steps
    s.group_size = 4;
    ASSERT_EQ(RunFeed(s, name), std::vector<int>(kWorld, 0)) << name;
    uint64_t records = 0;
    const std::string want = Reference(s, 0, &records);
    uint64_t read[kWorld], bytes_read[kWorld], sent[kWorld], received[kWorld], messages[kWorld];
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_EQ(ReadFileText(absl::StrCat(s.out, "/samples.", r)), want) << name << " rank " << r;
      std::istringstream(ReadFileText(absl::StrCat(s.out, "/counters.", r))) >> read[r] >>
          bytes_read[r] >> sent[r] >> received[r] >> messages[r];
    }
    if (c.readers == FeedReaders::kAll) {
      for (int r = 0; r < kWorld; ++r) {
        EXPECT_EQ(read[r], records) << name << " rank " << r;
        EXPECT_EQ(sent[r] + received[r], 0u) << name << " rank " << r;
      }
      continue;
    }
    EXPECT_EQ(read[0], records) << name;
    EXPECT_GT(received[1], 0u) << name;
    for (int r = 1; r < kWorld; ++r) {
      EXPECT_EQ(read[r], 0u) << name << " rank " << r;
      EXPECT_EQ(received[r], received[1])
          << name << " rank " << r;  // every member got the same bytes
    }
    if (c.relay == FeedRelay::kChain) {
      EXPECT_EQ(sent[0], received[1]) << name << ": the leader sends one copy";
      EXPECT_EQ(sent[1], received[1]) << name << ": member 1 forwards what it gets";
      EXPECT_EQ(sent[2], received[2]) << name << ": member 2 forwards what it gets";
      EXPECT_EQ(sent[3], 0u) << name << ": the last member forwards nothing";
    } else {
      EXPECT_EQ(sent[0], 3 * received[1]) << name << ": the leader sends every member a copy";
      for (int r = 1; r < kWorld; ++r) EXPECT_EQ(sent[r], 0u) << name << " rank " << r;
    }
  }
}

// Group sizes 1 (everyone reads for itself) and 4 (one reader for the world) give the same
// samples as reading for yourself.
// A group of one reads directly (its loader over the dataset, no messages) for either payload; a
// group of all is fed. Either way every rank gets exactly its own stream. Decoding threads: each
// rank's own loader's 2 workers, except that a leader decoding for its group (decoded payload)
// runs a 2-worker loader per member and its peers decode nothing.
TEST(GroupFeeder, GroupOfOneReadsDirectlyAndGroupOfAllIsFed) {
  for (int g : {1, 4}) {
    for (FeedPayload payload : {FeedPayload::kEncoded, FeedPayload::kDecoded}) {
      const std::string what = absl::StrCat("G ", g, " ", FeedPayloadName(payload));
      ddpio::testing::TempDir dir;
      FeedSetup s;
      s.data = dir.Sub("data");
      s.out = dir.path();
      ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 30, 30));
      s.options = SmallOptions();
      s.options.payload = payload;
      s.group_size = g;
      s.epochs = 1;
      ASSERT_EQ(RunFeed(s, absl::StrCat("g", g, FeedPayloadName(payload))),
                std::vector<int>(kWorld, 0))
          << what;
      ExpectEveryRankGotItsOwnStream(s, what);
      for (int r = 0; r < kWorld; ++r) {
        std::istringstream counters(ReadFileText(absl::StrCat(s.out, "/counters.", r)));
        uint64_t records = 0, bytes = 0, sent = 0, received = 0, messages = 0;
        std::string path;
        int threads = -1;
        counters >> records >> bytes >> sent >> received >> messages >> path >> threads;
        EXPECT_EQ(path, g == 1 ? "direct" : "fed") << what << " rank " << r;
        const bool decodes_for_group = g == 4 && payload == FeedPayload::kDecoded;
        EXPECT_EQ(threads, !decodes_for_group ? 2 : r == 0 ? 4 * 2 : 0) << what << " rank " << r;
        if (g == 1) {
          EXPECT_EQ(records, 8u) << what << " rank " << r;  // ceil(30 / 4) samples, padded
          EXPECT_GT(bytes, 0u) << what << " rank " << r;
          EXPECT_EQ(messages + sent + received, 0u) << what << " rank " << r;
        }
      }
    }
  }
}

// A feed over 40 images in `dir` whose record 17 (key 0000000000000011) fails its checksum.
absl::Status WithRecord17Damaged(const ddpio::testing::TempDir& dir, FeedPayload payload,
                                 int group_size, FeedSetup* s) {
  s->data = dir.Sub("data");
  DDPIO_RETURN_IF_ERROR(ddpio::testing::WriteJpegDataset(s->data, 40, 30));
  DDPIO_RETURN_IF_ERROR(ddpio::testing::DamageRecordChecksum(s->data, 17));
  s->options = SmallOptions();
  s->options.payload = payload;
  s->group_size = group_size;
  return absl::OkStatus();
}

// A record whose checksum fails on the leader under `fail`: every member of the group gets
// DataLoss naming the record (the leader sends the error); nobody hangs.
TEST(GroupFeeder, CorruptRecordIsDataLossOnEveryMember) {
  for (FeedPayload payload : {FeedPayload::kEncoded, FeedPayload::kDecoded}) {
    ddpio::testing::TempDir dir;
    FeedSetup s;
    ASSERT_OK(WithRecord17Damaged(dir, payload, 4, &s));
    auto codes = RunFeed(s, "corrupt", [&](comm::Job& job) {
      const int rank = job.info().rank;
      std::unique_ptr<storage::DatasetReader> reader;
      auto feeder = JoinFeeder(job, s, s.options, &reader);
      if (!feeder.ok()) return 4;
      return ddpio::testing::ExpectDataLossNaming(**feeder, rank, "0000000000000011");
    });
    EXPECT_EQ(codes, std::vector<int>(kWorld, 0)) << FeedPayloadName(payload);
  }
}

// After a data error (a store outage past its budget, a bad record) the feeder is not dead for
// good: a group of one — reading alone — starts again where it stood, and a group of several,
// whose error travelled to every member as the run's last message, starts again from a position
// every member shares (a state taken before the error; here the epoch's start). Both meet what is
// there now — here the same bad record again — not "failed earlier", and the batches before it
// are the same. (A group that lost a member cannot: KilledPeerStopsTheGroupCleanly.)
TEST(GroupFeeder, AfterADataErrorTheGroupStartsAgain) {
  for (int g : {1, 4}) {
    for (FeedPayload payload : {FeedPayload::kEncoded, FeedPayload::kDecoded}) {
      if (g == 1 && payload == FeedPayload::kDecoded) continue;  // (reads directly either way)
      ddpio::testing::TempDir dir;
      FeedSetup s;
      ASSERT_OK(WithRecord17Damaged(dir, payload, g, &s));
      auto codes = RunFeed(s, absl::StrCat("again", g), [&](comm::Job& job) {
        std::unique_ptr<storage::DatasetReader> reader;
        auto feeder = JoinFeeder(job, s, s.options, &reader);
        // The samples up to the error, then the error; 10 when the epoch had no bad record.
        const auto run = [&](uint64_t start, std::string* samples) -> int {
          if (!(*feeder)->StartEpoch(0, start).ok()) return 4;
          absl::StatusOr<loader::Batch> b = (*feeder)->Next();
          for (; b.ok(); b = (*feeder)->Next())
            *samples += DescribeBatch(*b, (*feeder)->sample_bytes());
          if (absl::IsOutOfRange(b.status())) return 10;  // record 17 is another rank's
          const bool names =
              b.status().message().find("0000000000000011") != absl::string_view::npos;
          return absl::IsDataLoss(b.status()) && names ? 0 : 5;
        };
        if (!feeder.ok()) return 3;
        std::string first, second;
        const int before = run(0, &first);
        if (before != 0) return before;
        // A group of one goes on from its own position; a group from one they all share.
        const uint64_t start = g == 1 ? (*feeder)->ResumePosition() : 0;
        const int again = run(start, &second);
        if (again != 0) return again + 20;
        return g == 1 || second == first ? 0 : 7;
      });
      EXPECT_NE(std::count(codes.begin(), codes.end(), 0), 0) << "G " << g;
      for (int c : codes) {
        EXPECT_TRUE(c == 0 || (g == 1 && c == 10))
            << "G " << g << " " << FeedPayloadName(payload) << ": " << c;
      }
    }
  }
}

// A JPEG that will not decode (valid checksum, data cut short) with the decoded payload: the
// leader decodes for everyone, and every member reports the leader's real error — index, key and
// source file — not a symptom such as "out of step".
TEST(GroupFeeder, UndecodableRecordIsTheLeadersErrorOnEveryMember) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 40, 30, 5, /*corrupt=*/{17}));
  s.options = SmallOptions();
  s.options.payload = FeedPayload::kDecoded;
  s.options.loader.decode = loader::DecodeMode::kExact;  // whole image: the cut is always reached
  s.group_size = 4;
  auto codes = RunFeed(s, "undecodable", [&](comm::Job& job) {
    const int rank = job.info().rank;
    std::unique_ptr<storage::DatasetReader> reader;
    auto feeder = JoinFeeder(job, s, s.options, &reader);
    if (!feeder.ok() || !(*feeder)->StartEpoch(0).ok()) return 4;
    for (;;) {
      auto b = (*feeder)->Next();
      if (b.ok()) continue;
      if (absl::IsOutOfRange(b.status())) return 10;
      std::fprintf(stderr, "rank %d: %s\n", rank, b.status().ToString().c_str());
      const bool names =
          b.status().message().find("sample 17 (key 0000000000000011, source 'img_17.jpg')") !=
          absl::string_view::npos;
      const bool real = b.status().message().find("corrupt JPEG") != absl::string_view::npos;
      return absl::IsDataLoss(b.status()) && names && real ? 0 : 11;
    }
  });
  EXPECT_EQ(codes, std::vector<int>(kWorld, 0));
}

// A group communicator that damages what it receives: one byte of the first chunked receive at
// least `min_bytes` long (a decoded batch's payload) is flipped, as a bad NIC or a buggy relay
// would. Everything else goes through unchanged.
class DamagingCommunicator : public comm::Communicator {
 public:
  DamagingCommunicator(std::unique_ptr<comm::Communicator> inner, size_t min_bytes)
      : inner_(std::move(inner)), min_bytes_(min_bytes) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  absl::Status Broadcast(void* d, size_t n, int root, std::chrono::milliseconds t) override {
    return inner_->Broadcast(d, n, root, t);
  }
  absl::Status Scatter(const std::vector<const void*>& parts, void* out, size_t n, int root,
                       std::chrono::milliseconds t) override {
    return inner_->Scatter(parts, out, n, root, t);
  }
  absl::Status AllReduce(float* d, size_t n, comm::ReduceOp op,
                         std::chrono::milliseconds t) override {
    return inner_->AllReduce(d, n, op, t);
  }
  absl::Status AllGather(const void* in, void* out, size_t n,
                         std::chrono::milliseconds t) override {
    return inner_->AllGather(in, out, n, t);
  }
  absl::Status Send(const void* d, size_t n, int peer, uint64_t tag,
                    std::chrono::milliseconds t) override {
    return inner_->Send(d, n, peer, tag, t);
  }
  absl::Status Recv(void* d, size_t n, int peer, uint64_t tag,
                    std::chrono::milliseconds t) override {
    return inner_->Recv(d, n, peer, tag, t);
  }
  absl::Status Barrier(std::chrono::milliseconds t) override { return inner_->Barrier(t); }
  absl::Status SendChunked(const void* d, size_t n, size_t chunk, int peer, uint64_t tag,
                           std::chrono::milliseconds t) override {
    return inner_->SendChunked(d, n, chunk, peer, tag, t);
  }
  absl::Status RecvChunked(void* d, size_t n, size_t chunk, int peer, uint64_t tag,
                           std::chrono::milliseconds t) override {
    DDPIO_RETURN_IF_ERROR(inner_->RecvChunked(d, n, chunk, peer, tag, t));
    if (!damaged_ && n >= min_bytes_) {
      static_cast<uint8_t*>(d)[n / 2] ^= 0x10;
      damaged_ = true;
    }
    return absl::OkStatus();
  }
  void Abort() override { inner_->Abort(); }

 private:
  std::unique_ptr<comm::Communicator> inner_;
  const size_t min_bytes_;
  bool damaged_ = false;
};

// A decoded batch damaged between leader and peer is DataLoss on the peer, naming the batch and
// its sender — never trained on (decoded payloads carry their CRC32C).
TEST(GroupFeeder, ADecodedBatchDamagedOnTheWayIsDataLoss) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 40, 30));
  s.options = SmallOptions();
  s.options.payload = FeedPayload::kDecoded;
  s.group_size = 2;
  auto codes = RunFeed(s, "damaged", [&](comm::Job& job) {
    const int rank = job.info().rank;
    auto layout = comm::GroupLayout::Make(ddpio::testing::kFeedWorld, s.group_size, s.layout);
    if (!layout.ok()) return 4;
    auto group = job.Group(*layout);
    if (!group.ok()) return 4;
    std::unique_ptr<storage::DatasetReader> reader;
    if (layout->is_leader(rank)) {
      auto opened = storage::DatasetReader::Open(s.data, {});
      if (!opened.ok()) return 4;
      reader = *std::move(opened);
    }
    const size_t sample =
        static_cast<size_t>(s.options.loader.augment.size) * s.options.loader.augment.size * 3;
    auto damaging = std::make_unique<DamagingCommunicator>(*std::move(group), sample);
    auto feeder = GroupFeeder::Create(reader.get(), *layout, rank, std::move(damaging), s.options);
    if (!feeder.ok() || !(*feeder)->StartEpoch(0).ok()) return 5;
    for (;;) {
      auto b = (*feeder)->Next();
      if (b.ok()) continue;
      if (absl::IsOutOfRange(b.status()))
        return layout->is_leader(rank) ? 0 : 10;  // a peer must not get here
      std::fprintf(stderr, "rank %d: %s\n", rank, b.status().ToString().c_str());
      // The leader learns of its peer's refusal as a lost peer.
      if (layout->is_leader(rank)) return absl::IsUnavailable(b.status()) ? 0 : 12;
      const bool named =
          b.status().message().find("is damaged: its payload's CRC32C") != absl::string_view::npos;
      return absl::IsDataLoss(b.status()) && named && !layout->is_leader(rank) ? 0 : 11;
    }
  });
  EXPECT_EQ(codes, std::vector<int>(ddpio::testing::kFeedWorld, 0));
}

// A peer killed mid-epoch: the rest of the group stop with Unavailable well within the timeout.
TEST(GroupFeeder, KilledPeerStopsTheGroupCleanly) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 80, 30));
  s.options = SmallOptions();
  s.options.timeout = std::chrono::seconds(30);
  s.group_size = 4;
  auto codes = RunFeed(s, "killed", [&](comm::Job& job) {
    const int rank = job.info().rank;
    std::unique_ptr<storage::DatasetReader> reader;
    auto feeder = JoinFeeder(job, s, s.options, &reader);
    if (!feeder.ok()) return 4;
    ddpio::testing::FeedUntilAPeerDies(**feeder, rank, 2, std::chrono::seconds(15));
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 42, 0}));
}

// Lock-step: every rank stops epoch 0 after 2 batches, resumes it from the saved position, and
// gets exactly the rest; epoch 1 is cut short by destroying the feeder mid-epoch, and nobody
// hangs.
TEST(GroupFeeder, StopResumeAndShutdownMidEpochStayInStep) {
  for (FeedPayload payload : {FeedPayload::kEncoded, FeedPayload::kDecoded}) {
    ddpio::testing::TempDir dir;
    FeedSetup s;
    s.data = dir.Sub("data");
    s.out = dir.path();
    ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 60, 30));
    s.options = SmallOptions();
    s.options.payload = payload;
    s.epochs = 1;
    auto codes = RunFeed(s, "resume", [&](comm::Job& job) {
      const int rank = job.info().rank;
      std::unique_ptr<storage::DatasetReader> reader;
      auto feeder = JoinFeeder(job, s, s.options, &reader);
      if (!feeder.ok() || !(*feeder)->StartEpoch(0).ok()) return 4;
      std::string samples;
      for (int i = 0; i < 2; ++i) {
        auto b = (*feeder)->Next();
        if (!b.ok()) return 5;
        samples += DescribeBatch(*b, (*feeder)->sample_bytes());
      }
      const uint64_t position = (*feeder)->ResumePosition();
      if (!(*feeder)->StartEpoch(0, position).ok()) return 6;
      for (auto b = (*feeder)->Next(); b.ok() || !absl::IsOutOfRange(b.status());
           b = (*feeder)->Next()) {
        if (!b.ok()) return 7;
        samples += DescribeBatch(*b, (*feeder)->sample_bytes());
      }
      WriteFile(absl::StrCat(s.out, "/samples.", rank), samples);
      if (!(*feeder)->StartEpoch(1).ok() || !(*feeder)->Next().ok()) return 8;
      feeder->reset();  // mid-epoch, on every rank
      return 0;
    });
    ASSERT_EQ(codes, std::vector<int>(kWorld, 0)) << FeedPayloadName(payload);
    ExpectEveryRankGotItsOwnStream(s, FeedPayloadName(payload));
  }
}

// Every member keeps all its batches (NextHeld, held_batches above the six it takes over two
// epochs): each stays as it was handed out while later batches arrive, across the next epoch's
// start and after the feeder is destroyed (decoded: the received buffer; encoded: the loader's
// slot), no two share memory, and they are what the rank would have read for itself.
TEST(GroupFeeder, HeldBatchesStayUnchangedPastLaterBatchesAndTheFeeder) {
  for (FeedPayload payload : {FeedPayload::kEncoded, FeedPayload::kDecoded}) {
    ddpio::testing::TempDir dir;
    FeedSetup s;
    s.data = dir.Sub("data");
    s.out = dir.path();
    ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 45, 30));  // 12 samples, 3 batches per rank
    s.options = SmallOptions();
    s.options.payload = payload;
    s.options.loader.held_batches = 8;
    s.epochs = 2;
    auto codes = RunFeed(s, "held", [&](comm::Job& job) {
      const int rank = job.info().rank;
      std::unique_ptr<storage::DatasetReader> reader;
      auto feeder = JoinFeeder(job, s, s.options, &reader);
      if (!feeder.ok()) return 4;
      const size_t sample_bytes = (*feeder)->sample_bytes();
      struct Kept {
        loader::HeldBatch held;
        std::string was;  // DescribeBatch() when handed out
      };
      std::vector<Kept> kept;
      auto changed = [&](const char* when) {
        for (const Kept& k : kept) {
          if (DescribeBatch(k.held.batch, sample_bytes) != k.was) {
            std::fprintf(stderr, "rank %d: epoch %lu step %lu changed %s\n", rank,
                         static_cast<unsigned long>(k.held.batch.epoch),
                         static_cast<unsigned long>(k.held.batch.step), when);
            return true;
          }
        }
        return false;
      };
      std::string samples;
      for (int e = 0; e < s.epochs; ++e) {
        if (!(*feeder)->StartEpoch(e).ok()) return 5;
        if (changed("when the next epoch started")) return 6;
        for (;;) {
          auto b = (*feeder)->NextHeld();
          if (absl::IsOutOfRange(b.status())) break;
          if (!b.ok()) {
            std::fprintf(stderr, "rank %d: %s\n", rank, b.status().ToString().c_str());
            return 7;
          }
          Kept k{*std::move(b), ""};
          k.was = DescribeBatch(k.held.batch, sample_bytes);
          samples += k.was;
          kept.push_back(std::move(k));
          if (changed("after a later batch arrived")) return 8;
        }
        if (changed("at the end of the epoch")) return 9;
      }
      std::set<const uint8_t*> buffers;
      for (const Kept& k : kept) buffers.insert(k.held.batch.data);
      if (kept.size() != 6 || buffers.size() != kept.size()) return 10;
      feeder->reset();
      if (changed("after the feeder was destroyed")) return 11;
      kept.clear();  // the holds go after the feeder
      WriteFile(absl::StrCat(s.out, "/samples.", rank), samples);
      return 0;
    });
    ASSERT_EQ(codes, std::vector<int>(kWorld, 0)) << FeedPayloadName(payload);
    ExpectEveryRankGotItsOwnStream(s, FeedPayloadName(payload));
  }
}

// Holding every batch of the epoch (held_batches = the batches a rank gets) is within the
// limit: the next NextHeld is the end of the epoch, in both payloads, not ResourceExhausted.
TEST(GroupFeeder, HoldingTheWholeEpochStillEndsIt) {
  for (FeedPayload payload : {FeedPayload::kEncoded, FeedPayload::kDecoded}) {
    ddpio::testing::TempDir dir;
    FeedSetup s;
    s.data = dir.Sub("data");
    ASSERT_OK(ddpio::testing::WriteJpegDataset(s.data, 45, 30));  // 3 batches per rank
    s.options = SmallOptions();
    s.options.payload = payload;
    s.options.loader.held_batches = 3;
    s.options.loader.held_timeout = std::chrono::milliseconds(50);
    auto codes = RunFeed(s, "held-all", [&](comm::Job& job) {
      const int rank = job.info().rank;
      std::unique_ptr<storage::DatasetReader> reader;
      auto feeder = JoinFeeder(job, s, s.options, &reader);
      if (!feeder.ok() || !(*feeder)->StartEpoch(0).ok()) return 4;
      std::vector<loader::HeldBatch> kept;
      for (;;) {
        auto b = (*feeder)->NextHeld();
        if (absl::IsOutOfRange(b.status())) break;
        if (!b.ok()) {
          std::fprintf(stderr, "rank %d after %zu batches: %s\n", rank, kept.size(),
                       b.status().ToString().c_str());
          return absl::IsResourceExhausted(b.status()) ? 6 : 7;
        }
        kept.push_back(*std::move(b));
      }
      return kept.size() == 3 ? 0 : 8;
    });
    EXPECT_EQ(codes, std::vector<int>(kWorld, 0)) << FeedPayloadName(payload);
  }
}

// Runs the feeder's creation on four ranks (groups [0, 1] and [2, 3]) with each rank's options
// changed by `change`; per rank: 0 if created, 1 if refused as InvalidArgument, 2 otherwise.
std::vector<int> CreateWithSettings(const std::string& job_id,
                                    const std::function<void(int rank, FeederOptions&)>& change) {
  ddpio::testing::TempDir dir;
  FeedSetup s;
  s.data = dir.Sub("data");
  EXPECT_OK(ddpio::testing::WriteJpegDataset(s.data, 10, 30));
  return RunFeed(s, job_id, [&](comm::Job& job) {
    std::unique_ptr<storage::DatasetReader> reader;
    FeederOptions o = SmallOptions();
    change(job.info().rank, o);
    auto feeder = JoinFeeder(job, s, o, &reader);
    return feeder.ok() ? 0 : absl::IsInvalidArgument(feeder.status()) ? 1 : 2;
  });
}

// Members with different settings are refused at creation, on every member, naming the rule.
TEST(GroupFeeder, MembersMustAgreeOnTheSettings) {
  auto codes = CreateWithSettings("disagree", [](int rank, FeederOptions& o) {
    if (rank == 3) o.loader.batch_size = 5;
  });
  // Group [0, 1] agrees; in group [2, 3] rank 3 differs: both of them are told.
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 1, 1}));
}

// The normalisation is part of the agreement too: with float output the leader's mean/stddev
// would silently become every member's (the digest once left them out).
TEST(GroupFeeder, MembersMustAgreeOnTheNormalisation) {
  auto codes = CreateWithSettings("disagree-norm", [](int rank, FeederOptions& o) {
    o.loader.output = loader::OutputFormat::kFloatNchw;
    if (rank == 1) o.loader.stddev[2] = 0.5f;  // group [0, 1]
    if (rank == 3) o.loader.mean[0] = 0.5f;    // group [2, 3]
  });
  EXPECT_EQ(codes, (std::vector<int>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace ddpio::broadcast
