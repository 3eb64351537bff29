// The remote reader and the upload against a store that misbehaves on purpose (the in-memory store
// of tests/support/memory_object_store.h, faults on demand): no gateway, no AWS_* variables.
// Bursts of 503 SlowDown within the retry budget are ridden out and counted, a budget spent is an
// error naming the object and the attempts, a final refusal is not retried, damaged bytes are
// caught by the record's checksum and fetched again (and named when the store keeps them), and an
// upload rides out a flaky PUT. A token dataset's document lengths travel with its index (opening
// fetches no record for them; a table that lies is DataLoss). The same reader and upload tests
// the gateway runs also run on this store (ctest storage_memory_store).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/remote/remote_gateway_test_fixture.h"
#include "ddpio/storage/remote/upload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/memory_object_store.h"
#include "tests/support/status_matchers.h"

namespace ddpio::storage::remote {
namespace {

using ::testing::HasSubstr;

// Where the upload puts records by default (UploadOptions::chunk_bytes): chunk objects.
constexpr char kRecordObjects[] = "chunks/";

class FakeStoreTest : public RemoteDatasetTest {
 protected:
  bool UsesMemoryStore() const override { return true; }
  void SetUp() override {
    RemoteDatasetTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_OK(Upload(local_, Url(), config_).status());
  }
  // Record i through a reader of the store (a copy of its payload).
  absl::StatusOr<std::string> Payload(DatasetReader& reader, uint64_t i) {
    DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, reader.BeginRead());
    DDPIO_ASSIGN_OR_RETURN(RecordView r, txn.Get(i));
    return std::string(r.payload.begin(), r.payload.end());
  }
  std::string LocalPayload(uint64_t i) {
    auto local = DatasetReader::Open(local_);
    EXPECT_OK(local.status());
    return *Payload(**local, i);
  }
};

TEST_F(FakeStoreTest, SlowDownsWithinTheRetryBudgetAreRiddenOutAndCounted) {
  memory_->AddFault(
      {.method = "GET",
       .key_contains = kRecordObjects,
       .times = 5,
       .status = absl::UnavailableError("HTTP 503 SlowDown: Please reduce your rate")});
  ExpectSameRecords(Url());
  EXPECT_GE(memory_->requests("GET"), 5u);
  RemoteOptions o;
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_, o));
  memory_->AddFault({.method = "GET",
                     .key_contains = kRecordObjects,
                     .times = 3,
                     .status = absl::UnavailableError("HTTP 503 SlowDown")});
  ASSERT_OK(store->Fetch(7).status());
  EXPECT_EQ(store->counters().retries, 3u) << "each 503 is one retry, counted";
}

TEST_F(FakeStoreTest, ARetryBudgetSpentIsAnErrorNamingTheObjectAndTheAttempts) {
  RemoteOptions o;
  o.retry.give_up_after = std::chrono::milliseconds(0);
  o.retry.max_attempts = 3;
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_, o));
  memory_->AddFault({.method = "GET",
                     .key_contains = kRecordObjects,
                     .times = -1,
                     .status = absl::UnavailableError("HTTP 503 SlowDown")});
  const absl::Status failed = store->Fetch(11).status();
  EXPECT_CODE(failed, kUnavailable);
  EXPECT_THAT(failed.message(), HasSubstr(Url() + "/" + kRecordObjects));
  EXPECT_THAT(failed.message(), HasSubstr("3 attempts"));
  // The store back: the same reader goes on.
  memory_->ClearFaults();
  ASSERT_OK_AND_ASSIGN(auto bytes, store->Fetch(11));
  EXPECT_FALSE(bytes->empty());
}

TEST_F(FakeStoreTest, AFinalRefusalIsNotRetried) {
  memory_->AddFault({.method = "GET",
                     .key_contains = "ddpio-remote.json",
                     .times = 1,
                     .status = absl::PermissionDeniedError("HTTP 403 AccessDenied")});
  const uint64_t before = memory_->requests("GET");
  auto denied = OpenUrl(Url());
  EXPECT_CODE(denied, kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr(Url()));
  EXPECT_EQ(memory_->requests("GET"), before + 1) << "a 403 was asked again";
}

TEST_F(FakeStoreTest, BytesDamagedOnTheWayAreCaughtAndFetchedAgain) {
  ASSERT_OK_AND_ASSIGN(auto reader, OpenUrl(Url()));
  memory_->AddFault(
      {.method = "GET", .key_contains = kRecordObjects, .times = 1, .flip_byte = true});
  ASSERT_OK_AND_ASSIGN(std::string got, Payload(*reader, 42));
  EXPECT_EQ(got, LocalPayload(42)) << "a damaged record was served";
  ASSERT_NE(reader->remote(), nullptr);
  EXPECT_EQ(reader->remote()->counters().refetches, 1u);
}

TEST_F(FakeStoreTest, BytesTheStoreKeepsDamagedAreNamedNeverServed) {
  ASSERT_OK_AND_ASSIGN(auto reader, OpenUrl(Url()));
  memory_->AddFault(
      {.method = "GET", .key_contains = kRecordObjects, .times = -1, .flip_byte = true});
  auto got = Payload(*reader, 42);
  EXPECT_CODE(got, kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr(kRecordObjects));
}

TEST_F(FakeStoreTest, AnAnswerOfTheWrongLengthIsDataLossNamingTheRange) {
  RemoteOptions o;
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_, o));
  for (int64_t delta : {-1, 5}) {
    memory_->AddFault(
        {.method = "GET", .key_contains = kRecordObjects, .times = 1, .body_delta = delta});
    const absl::Status st = store->Fetch(3).status();
    EXPECT_CODE(st, kDataLoss) << delta;
    EXPECT_THAT(st.message(), HasSubstr("bytes came back for a range of")) << delta;
  }
}

TEST_F(FakeStoreTest, AnUploadRidesOutFlakyPutsAndReadsBackWhole) {
  memory_->AddFault({.method = "PUT",
                     .key_contains = "other/",
                     .times = 4,
                     .status = absl::UnavailableError("connection reset by peer")});
  ASSERT_OK(Upload(local_, Url("other"), config_).status());
  ExpectSameRecords(Url("other"));
}

// An epoch in shuffled order, a window at a time as the loader asks (Prefetch, then Fetch each):
// the records' bytes, by index.
std::vector<std::string> EpochInOrder(RemoteDataset& store, const std::vector<uint64_t>& order) {
  std::vector<std::string> bytes(store.size());
  for (size_t begin = 0; begin < order.size(); begin += 16) {
    const size_t end = std::min(order.size(), begin + 16);
    store.Prefetch(absl::MakeConstSpan(order).subspan(begin, end - begin));
    for (size_t k = begin; k < end; ++k) {
      auto got = store.Fetch(order[k]);
      EXPECT_OK(got.status()) << order[k];
      if (got.ok()) bytes[order[k]] = **got;
    }
  }
  return bytes;
}

std::vector<std::string> ShuffledEpoch(RemoteDataset& store, uint32_t seed) {
  std::vector<uint64_t> order(store.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  return EpochInOrder(store, order);
}

// An epoch in an order that keeps to a few chunks at a time, as the sampler's block order does:
// the chunks shuffled, the records of each two consecutive ones shuffled together.
std::vector<uint64_t> ChunkLocalOrder(const RemoteDataset& store, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint64_t> chunks(store.chunk_count());
  std::iota(chunks.begin(), chunks.end(), 0);
  std::shuffle(chunks.begin(), chunks.end(), rng);
  std::vector<uint64_t> order;
  for (size_t c = 0; c < chunks.size(); c += 2) {
    const size_t first = order.size();
    for (size_t k = c; k < std::min(chunks.size(), c + 2); ++k) {
      for (uint64_t i = store.chunk_begin(chunks[k]); i < store.chunk_begin(chunks[k] + 1); ++i) {
        order.push_back(i);
      }
    }
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(first), order.end(), rng);
  }
  return order;
}

TEST_F(FakeStoreTest, ADatasetThatFitsIsFetchedAWholeChunkAtATimeInAnyOrder) {
  RemoteOptions per_record;
  per_record.whole_chunks = false;
  per_record.max_request_bytes = 1;  // a GET a record: the records lie back to back
  ASSERT_OK_AND_ASSIGN(auto reference, RemoteDataset::Open(Url(), config_, per_record));
  EXPECT_FALSE(reference->fetches_whole_chunks());
  const uint64_t gets_before_reference = memory_->requests("GET");
  const std::vector<std::string> expected = ShuffledEpoch(*reference, 7);
  const uint64_t reference_gets = memory_->requests("GET") - gets_before_reference;

  RemoteOptions o;
  o.max_request_bytes = 32 << 10;  // several chunks of this small dataset
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_, o));
  ASSERT_TRUE(store->fetches_whole_chunks());
  const uint64_t chunks = store->chunk_count();
  ASSERT_GT(chunks, 3u);
  ASSERT_LT(chunks, store->size() / 4);
  const uint64_t before = memory_->requests("GET");
  EXPECT_EQ(ShuffledEpoch(*store, 7), expected) << "the same bytes as record by record";
  const uint64_t gets = memory_->requests("GET") - before;
  // One GET per chunk (a record fetched before its chunk-mates arrived may cost one more).
  EXPECT_LE(gets, chunks + 4) << "chunks " << chunks;
  EXPECT_LT(gets * 4, reference_gets) << "record by record: " << reference_gets;
  EXPECT_GT(store->counters().chunk_records, store->size() / 2);
  // A second epoch in another order asks the store nothing.
  const uint64_t second = memory_->requests("GET");
  EXPECT_EQ(ShuffledEpoch(*store, 8), expected);
  EXPECT_EQ(memory_->requests("GET"), second);
}

// With first_batch_records (the pipeline sets it to the batch size), the first records asked for
// come each by a GET of its own, sent before any chunk's GET: a first batch drawn from a shuffled
// dataset touches most chunks, and would otherwise wait for all of them. The chunks still come a
// GET each (the first batch's records are fetched twice, once), and every record's bytes are the
// ones read record by record.
TEST_F(FakeStoreTest, TheFirstBatchIsFetchedRecordByRecordAheadOfItsChunks) {
  RemoteOptions per_record;
  per_record.whole_chunks = false;
  ASSERT_OK_AND_ASSIGN(auto reference, RemoteDataset::Open(Url(), config_, per_record));
  const std::vector<std::string> expected = ShuffledEpoch(*reference, 7);

  constexpr uint64_t kFirstBatch = 8;
  RemoteOptions o;
  o.max_request_bytes = 32 << 10;  // several chunks of this small dataset
  o.first_batch_records = kFirstBatch;
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_, o));
  ASSERT_TRUE(store->fetches_whole_chunks());
  const size_t before = memory_->Ranges(kRecordObjects).size();
  EXPECT_EQ(ShuffledEpoch(*store, 7), expected) << "the same bytes as record by record";
  const auto all = memory_->Ranges(kRecordObjects);
  const std::vector<std::pair<uint64_t, uint64_t>> ranges(
      all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
  ASSERT_GT(ranges.size(), kFirstBatch);
  std::vector<uint64_t> order(store->size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));  // ShuffledEpoch's order
  for (uint64_t k = 0; k < kFirstBatch; ++k) {
    const auto [offset, length] = ranges[k];
    EXPECT_THAT(store->Where(order[k]),
                HasSubstr(absl::StrCat(" bytes ", offset, "-", offset + length - 1)))
        << "GET " << k << " is not the first batch's record " << k << " alone";
  }
  for (size_t k = kFirstBatch; k < ranges.size(); ++k) {
    EXPECT_GT(ranges[k].second, 2 * (ranges[0].second + ranges[1].second))
        << "GET " << k << " after the first batch is not a chunk";
  }
  EXPECT_LE(ranges.size(), kFirstBatch + store->chunk_count() + 4)
      << "a chunk came in more than one GET";
}

// Record by record, the GETs of a read-ahead are sent in the order their records are needed, not
// in the order they lie in the file: the client keeps a few in flight and queues the rest, so the
// first batch would otherwise wait behind most of the read-ahead.
TEST_F(FakeStoreTest, RecordByRecordTheGetsGoInTheOrderTheRecordsAreNeeded) {
  RemoteOptions o;
  o.whole_chunks = false;
  o.max_request_bytes = 1;  // no two records joined in one GET
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_, o));
  std::vector<uint64_t> order(store->size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  order.resize(std::min<size_t>(order.size(), 32));
  const size_t before = memory_->Ranges(kRecordObjects).size();
  store->Prefetch(order);
  const auto all = memory_->Ranges(kRecordObjects);
  ASSERT_EQ(all.size() - before, order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const auto [offset, length] = all[before + k];
    EXPECT_THAT(store->Where(order[k]),
                HasSubstr(absl::StrCat(" bytes ", offset, "-", offset + length - 1)))
        << "GET " << k << " is not for the record needed " << k << "th";
  }
}

TEST_F(FakeStoreTest, ADatasetLargerThanTheBudgetIsFetchedOnlyAsAsked) {
  RemoteOptions o;
  o.max_request_bytes = 32 << 10;
  o.memory_bytes = 16 << 10;  // less than the dataset
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_, o));
  EXPECT_FALSE(store->fetches_whole_chunks());
  ShuffledEpoch(*store, 7);
  EXPECT_EQ(store->counters().chunk_records, 0u);
}

TEST_F(FakeStoreTest, InAnOrderKeepingToFewChunksALargerDatasetIsFetchedAWholeChunkAtATime) {
  RemoteOptions per_record;
  per_record.whole_chunks = false;
  ASSERT_OK_AND_ASSIGN(auto reference, RemoteDataset::Open(Url(), config_, per_record));
  const std::vector<std::string> expected = ShuffledEpoch(*reference, 7);
  uint64_t total = 0;
  for (const std::string& b : expected) total += b.size();

  RemoteOptions o;
  o.max_request_bytes = 16 << 10;
  o.memory_bytes = RemoteOptions::kMinChunksHeld * o.max_request_bytes;
  ASSERT_GT(total, 2 * o.memory_bytes) << "the dataset must not fit the budget";
  {
    ASSERT_OK_AND_ASSIGN(auto exact, RemoteDataset::Open(Url(), config_, o));
    EXPECT_FALSE(exact->fetches_whole_chunks()) << "any order: only the records asked for";
  }
  o.chunk_order_records = 2 * (o.max_request_bytes / 550);  // ~2 chunks (records of ~550 bytes)
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_, o));
  ASSERT_TRUE(store->fetches_whole_chunks());
  const uint64_t chunks = store->chunk_count();
  ASSERT_GT(chunks, 8u);
  const uint64_t before = memory_->requests("GET");
  EXPECT_EQ(EpochInOrder(*store, ChunkLocalOrder(*store, 3)), expected);
  const uint64_t gets = memory_->requests("GET") - before;
  EXPECT_LE(gets, chunks + chunks / 4 + 2) << "about one GET per chunk; chunks " << chunks;
  EXPECT_GT(store->counters().chunk_records, store->size() / 2);
  // A budget that cannot hold a few chunks: only the records asked for.
  o.memory_bytes = o.max_request_bytes;
  ASSERT_OK_AND_ASSIGN(auto small, RemoteDataset::Open(Url(), config_, o));
  EXPECT_FALSE(small->fetches_whole_chunks());
}

TEST_F(FakeStoreTest, ARecordDamagedInTheStoreIsNamedAndTheRestOfItsChunkServed) {
  ASSERT_OK_AND_ASSIGN(auto first, OpenUrl(Url()));
  ASSERT_TRUE(first->remote()->fetches_whole_chunks());
  // Record 42's bytes in the stored file, as the reader names them: "<object> bytes A-B".
  const std::string where = first->remote()->Where(42);
  uint64_t from = 0, to = 0;
  ASSERT_EQ(std::sscanf(where.substr(where.rfind(" bytes ")).c_str(), " bytes %lu-%lu", &from, &to),
            2)
      << where;
  const std::string head = absl::StrCat("s3://", bucket_, "/");
  const std::string key = where.substr(head.size(), where.rfind(" bytes ") - head.size());
  ASSERT_THAT(key, ::testing::StartsWith("train/chunks/")) << where;
  ASSERT_OK_AND_ASSIGN(std::string object, client_->Get(bucket_, key, uint64_t{1} << 30));
  object[(from + to) / 2] ^= 0x20;
  ASSERT_OK(client_->Put(bucket_, key, object));

  ASSERT_OK_AND_ASSIGN(auto reader, OpenUrl(Url()));
  ASSERT_OK_AND_ASSIGN(ReadTxn txn, reader->BeginRead());
  std::vector<uint64_t> all(reader->size());
  std::iota(all.begin(), all.end(), 0);
  ASSERT_OK(txn.Prefetch(all).status());
  for (uint64_t i = 0; i < reader->size(); ++i) {
    absl::StatusOr<RecordView> r = txn.Get(i);
    if (i == 42) {
      EXPECT_CODE(r, kDataLoss);
      EXPECT_THAT(r.status().message(), HasSubstr(where))
          << "names the record's bytes in the store";
      continue;
    }
    ASSERT_OK(r.status()) << i;
    ASSERT_EQ(std::string(r->payload.begin(), r->payload.end()), LocalPayload(i)) << i;
  }
  EXPECT_EQ(reader->remote()->counters().refetches, 1u) << "fetched again once, then named";
}

// Every record's stored bytes, by index, read record by record (no chunks, no folder).
absl::StatusOr<std::vector<std::string>> RecordsOneByOneOf(const std::string& url,
                                                           const s3::S3Config& config) {
  RemoteOptions per_record;
  per_record.whole_chunks = false;
  DDPIO_ASSIGN_OR_RETURN(auto reference, RemoteDataset::Open(url, config, per_record));
  return ShuffledEpoch(*reference, 7);
}

// The one sub-folder a reader made in the cache folder `dir` (named by the dataset's content).
std::string DatasetFolderName(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_EQ(names.size(), 1u);
  return names.empty() ? "" : names[0];
}

// In the exact order a whole chunk brings 1/share the bytes a reader needs an epoch: below half, it
// fetches the records asked for. The share is its node's with a cache folder (its ranks share
// the chunks), its own without; whole chunks asked for come whatever the share; the block order,
// whose chunks are a reader's own, keeps them.
TEST_F(FakeStoreTest, AReaderNeedingLessThanHalfOfEachChunkFetchesTheRecordsAskedFor) {
  RemoteOptions o;
  o.max_request_bytes = 32 << 10;
  o.chunk_share = {/*alone=*/0.25, /*folder=*/1};
  ASSERT_OK_AND_ASSIGN(auto alone, RemoteDataset::Open(Url(), config_, o));
  EXPECT_FALSE(alone->fetches_whole_chunks());
  ASSERT_OK_AND_ASSIGN(const std::vector<std::string> expected, RecordsOneByOneOf(Url(), config_));
  std::vector<uint64_t> quarter;  // the reader's quarter of the samples
  for (uint64_t i = 0; i < alone->size(); i += 4) quarter.push_back(i);
  const uint64_t before = memory_->requests("GET");
  for (uint64_t i : quarter) {
    ASSERT_OK_AND_ASSIGN(auto got, alone->Fetch(i));
    EXPECT_EQ(*got, expected[i]) << i;
  }
  EXPECT_EQ(memory_->requests("GET") - before, quarter.size()) << "a GET a record asked for";
  EXPECT_EQ(alone->counters().records_fetched, quarter.size()) << "no chunk mate";

  RemoteOptions half = o;
  half.chunk_share.alone = 0.5;
  ASSERT_OK_AND_ASSIGN(auto at_half, RemoteDataset::Open(Url(), config_, half));
  EXPECT_TRUE(at_half->fetches_whole_chunks());
  RemoteOptions folder = o;
  folder.cache_dir = dir_.Sub("cache");  // the node's ranks need every chunk between them
  ASSERT_OK_AND_ASSIGN(auto node, RemoteDataset::Open(Url(), config_, folder));
  EXPECT_TRUE(node->fetches_whole_chunks());
  folder.chunk_share.folder = 0.25;
  ASSERT_OK_AND_ASSIGN(auto node_of_four, RemoteDataset::Open(Url(), config_, folder));
  EXPECT_FALSE(node_of_four->fetches_whole_chunks());
  RemoteOptions asked = o;
  asked.min_chunk_share = 0;
  ASSERT_OK_AND_ASSIGN(auto forced, RemoteDataset::Open(Url(), config_, asked));
  EXPECT_TRUE(forced->fetches_whole_chunks());
  RemoteOptions block = o;
  block.chunk_order_records = 64;
  block.order_chunk_records = 16;
  ASSERT_OK_AND_ASSIGN(auto block_order, RemoteDataset::Open(Url(), config_, block));
  EXPECT_TRUE(block_order->fetches_whole_chunks());
}

TEST_F(FakeStoreTest, ReadersSharingACacheFolderFetchEachChunkOnceBetweenThem) {
  ASSERT_OK_AND_ASSIGN(const std::vector<std::string> expected, RecordsOneByOneOf(Url(), config_));

  // Two readers on one folder, as two ranks of a node: each has its own claims (its own open of
  // the claims file), as separate processes do.
  RemoteOptions o;
  o.max_request_bytes = 32 << 10;
  o.cache_dir = dir_.Sub("cache");
  ASSERT_OK_AND_ASSIGN(auto first, RemoteDataset::Open(Url(), config_, o));
  ASSERT_OK_AND_ASSIGN(auto second, RemoteDataset::Open(Url(), config_, o));
  ASSERT_TRUE(first->fetches_whole_chunks());
  const uint64_t before = memory_->requests("GET");
  EXPECT_EQ(ShuffledEpoch(*first, 7), expected);
  EXPECT_LE(memory_->requests("GET") - before, first->chunk_count() + 4);
  const uint64_t after_first = memory_->requests("GET");
  EXPECT_EQ(ShuffledEpoch(*second, 9), expected);
  EXPECT_EQ(memory_->requests("GET"), after_first)
      << "what the other reader fetched into the folder is read from there";
  EXPECT_EQ(second->counters().disk_hits, second->size());
}

TEST_F(FakeStoreTest, AChunkAnotherReaderIsFetchingIsLeftToItAndReadFromTheFolder) {
  ASSERT_OK_AND_ASSIGN(const std::vector<std::string> expected, RecordsOneByOneOf(Url(), config_));
  RemoteOptions o;
  o.max_request_bytes = 32 << 10;
  o.cache_dir = dir_.Sub("cache");
  ASSERT_OK_AND_ASSIGN(auto reader, RemoteDataset::Open(Url(), config_, o));
  ASSERT_TRUE(reader->fetches_whole_chunks());
  ASSERT_GT(reader->chunk_count(), 3u);
  // The other process of the node: the folder and its claims, opened on their own.
  ASSERT_OK_AND_ASSIGN(
      auto peer, RecordCache::Open(o.cache_dir, DatasetFolderName(o.cache_dir), o.cache_bytes));
  auto records_of = [&](uint64_t c) {
    std::vector<uint64_t> r;
    for (uint64_t i = reader->chunk_begin(c); i < reader->chunk_begin(c + 1); ++i) r.push_back(i);
    return r;
  };

  // Chunk 0 is being fetched by the peer: asked ahead, it costs no GET.
  std::optional<RecordCache::Claim> claim = peer->TryClaim(reader->chunk_begin(0));
  ASSERT_TRUE(claim.has_value() && claim->locked());
  const uint64_t before = memory_->requests("GET");
  reader->Prefetch(records_of(0));
  EXPECT_EQ(memory_->requests("GET"), before) << "left to the reader that claimed it";
  EXPECT_EQ(reader->counters().peer_chunks, 1u);
  // The peer writes the chunk from another thread and lets go; a Fetch waits for it if it comes
  // first, and reads the folder either way.
  std::thread writer([&] {
    for (uint64_t i : records_of(0)) peer->Put(i, expected[i]);
    claim->Release();
  });
  for (uint64_t i : records_of(0)) {
    ASSERT_OK_AND_ASSIGN(auto got, reader->Fetch(i));
    EXPECT_EQ(*got, expected[i]) << i;
  }
  writer.join();
  EXPECT_EQ(memory_->requests("GET"), before) << "every record of chunk 0 came from the folder";

  // A peer that claims chunk 1 and goes away without writing it (killed mid-GET: the kernel drops
  // its lock): the reader fetches the chunk itself.
  {
    std::optional<RecordCache::Claim> dead = peer->TryClaim(reader->chunk_begin(1));
    ASSERT_TRUE(dead.has_value());
    reader->Prefetch(records_of(1));
  }
  for (uint64_t i : records_of(1)) {
    ASSERT_OK_AND_ASSIGN(auto got, reader->Fetch(i));
    EXPECT_EQ(*got, expected[i]) << i;
  }
  EXPECT_GT(memory_->requests("GET"), before);
  // And chunk 2, claimed by nobody, is fetched whole by one GET when asked ahead.
  const uint64_t before_2 = memory_->requests("GET");
  reader->Prefetch(records_of(2));
  EXPECT_EQ(memory_->requests("GET"), before_2 + 1);
}

// A chunk partly in the folder already (every second record, fetched one by one by another reader)
// is fetched by one GET, the held records' bytes between included, not by a GET per hole.
TEST_F(FakeStoreTest, AChunkPartlyInTheFolderCostsOneGet) {
  ASSERT_OK_AND_ASSIGN(const std::vector<std::string> expected, RecordsOneByOneOf(Url(), config_));
  RemoteOptions o;
  o.max_request_bytes = 32 << 10;
  o.coalesce_gap = 0;  // a GET planned record by record would stop at every record held
  o.cache_dir = dir_.Sub("cache");
  RemoteOptions one_by_one = o;
  one_by_one.whole_chunks = false;
  ASSERT_OK_AND_ASSIGN(auto other, RemoteDataset::Open(Url(), config_, one_by_one));
  ASSERT_OK_AND_ASSIGN(auto probe, RemoteDataset::Open(Url(), config_, o));
  ASSERT_TRUE(probe->fetches_whole_chunks());
  ASSERT_GT(probe->chunk_count(), 2u);
  const uint64_t begin = probe->chunk_begin(1), end = probe->chunk_begin(2);
  ASSERT_GE(end - begin, 5u);
  probe.reset();
  for (uint64_t i = begin + 1; i < end; i += 2) ASSERT_OK(other->Fetch(i).status());
  // Opened now, the reader finds those records in the folder.
  ASSERT_OK_AND_ASSIGN(auto reader, RemoteDataset::Open(Url(), config_, o));
  const uint64_t before = memory_->requests("GET");
  for (uint64_t i = begin; i < end; ++i) {
    ASSERT_OK_AND_ASSIGN(auto got, reader->Fetch(i));
    EXPECT_EQ(*got, expected[i]) << i;
  }
  EXPECT_EQ(memory_->requests("GET") - before, 1u) << "a GET per hole";
  EXPECT_EQ(reader->counters().disk_hits, (end - begin) / 2) << "the held records from the folder";
}

// Bytes of the records in the cache folder `dir` (its claims file aside).
uint64_t FolderRecordBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename() != "claims") bytes += e.file_size();
  }
  return bytes;
}

// In an order keeping to a few chunks (the block order), with a cache folder the dataset does not
// fit: a record leaves the folder once served, so a chunk leaves it with its last sample and the
// folder holds about the chunks in use, not its budget's worth. Two readers on one folder (two
// ranks of a node, each serving its own samples) leave it empty at the epoch's end, having
// fetched each chunk once between them. A dataset that fits the folder stays in it.
TEST_F(FakeStoreTest, InTheBlockOrderAChunkLeavesTheCacheFolderWithItsLastSample) {
  ASSERT_OK_AND_ASSIGN(const std::vector<std::string> expected, RecordsOneByOneOf(Url(), config_));
  uint64_t total = 0;
  for (const std::string& b : expected) total += b.size();
  RemoteOptions o;
  o.max_request_bytes = 16 << 10;
  o.memory_bytes = RemoteOptions::kMinChunksHeld * o.max_request_bytes;
  o.chunk_order_records = 2 * (o.max_request_bytes / 550);  // ~2 chunks (records of ~550 bytes)
  o.cache_dir = dir_.Sub("cache");
  o.cache_bytes = total * 3 / 4;
  ASSERT_OK_AND_ASSIGN(auto a, RemoteDataset::Open(Url(), config_, o));
  ASSERT_OK_AND_ASSIGN(auto b, RemoteDataset::Open(Url(), config_, o));
  ASSERT_TRUE(a->fetches_whole_chunks());
  ASSERT_GT(a->chunk_count(), 8u);
  const std::vector<uint64_t> order = ChunkLocalOrder(*a, 5);
  const uint64_t gets_before = memory_->requests("GET");
  uint64_t most = 0;
  for (size_t k = 0; k < order.size(); ++k) {  // a serves the even places, b the odd ones
    ASSERT_OK_AND_ASSIGN(auto bytes, (k % 2 == 0 ? a : b)->Fetch(order[k]));
    EXPECT_EQ(*bytes, expected[order[k]]) << order[k];
    most = std::max(most, FolderRecordBytes(o.cache_dir));
  }
  EXPECT_EQ(FolderRecordBytes(o.cache_dir), 0u) << "served records were left in the folder";
  EXPECT_LE(most, RemoteOptions::kMinChunksHeld * o.max_request_bytes)
      << "the folder held more than the chunks in use (budget " << o.cache_bytes << ")";
  EXPECT_EQ(a->counters().served_evicted + b->counters().served_evicted, a->size());
  EXPECT_LE(memory_->requests("GET") - gets_before, a->chunk_count() + 2)
      << "a chunk was fetched more than once between the two readers";

  // A budget the dataset fits: what is served stays for the next epoch.
  o.cache_dir = dir_.Sub("roomy");
  o.cache_bytes = 2 * total;
  ASSERT_OK_AND_ASSIGN(auto roomy, RemoteDataset::Open(Url(), config_, o));
  EXPECT_EQ(EpochInOrder(*roomy, ChunkLocalOrder(*roomy, 5)), expected);
  EXPECT_EQ(roomy->counters().served_evicted, 0u);
  EXPECT_EQ(FolderRecordBytes(o.cache_dir), total);
}

// The benchmarks' bulk rate (bench storage): every record's bytes, a GET a run of consecutive
// records starting at a multiple of the run (chunk objects hold records back to back: the bytes
// are exactly the records'), nothing counted by the reader.
TEST_F(FakeStoreTest, RawChunksAreEveryRecordInAGetPerRunOfRecords) {
  ASSERT_OK_AND_ASSIGN(auto store, RemoteDataset::Open(Url(), config_));
  std::vector<uint64_t> all(store->size());
  std::iota(all.begin(), all.end(), 0);
  ASSERT_OK_AND_ASSIGN(const uint64_t record_bytes, store->FetchRaw(all));
  for (const uint64_t run : {uint64_t{128}, uint64_t{7}, uint64_t{1000}}) {
    const uint64_t gets_before = memory_->requests("GET");
    ASSERT_OK_AND_ASSIGN(const uint64_t bytes, store->FetchRawChunks(run));
    EXPECT_EQ(bytes, record_bytes) << run;
    EXPECT_EQ(memory_->requests("GET") - gets_before, (kRecords + run - 1) / run) << run;
  }
  EXPECT_EQ(store->counters().records_fetched, 0u);
  EXPECT_CODE(store->FetchRawChunks(0), kInvalidArgument);
}

// A token dataset (format 4) in the store: its documents' lengths travel in the record index, so
// that a reader knows them at open without fetching a record (a cluster's first batch does not
// wait for a scan of the dataset); a table the store holds damaged, or one that lies about the
// records, is DataLoss naming the index; an older upload without the table still opens (and
// counts the documents by reading them).
class TokenStoreTest : public RemoteDatasetTest {
 protected:
  static constexpr uint64_t kDocuments = 200;
  bool UsesMemoryStore() const override { return true; }
  void SetUp() override {
    RemoteDatasetTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    tokens_ = dir_.Sub("tokens.lmdb");
    for (uint64_t i = 0; i < kDocuments; ++i) lengths_.push_back(DocumentIds(i));
    ASSERT_NO_FATAL_FAILURE(WriteTokens(tokens_, lengths_));
  }
  // Document i's ids: 0 now and then (an empty document), else 1 to 53.
  static uint32_t DocumentIds(uint64_t i) {
    return i % 37 == 0 ? 0 : static_cast<uint32_t>(i * 7 % 53 + 1);
  }
  // Writes the documents of DocumentIds at `path` (2-byte ids) and, as `ddpio convert` does,
  // `recorded` as their lengths (none when empty).
  static void WriteTokens(const std::string& path, const std::vector<uint32_t>& recorded) {
    DatasetHeader h = testing::MakeHeader(0);
    h.format_version = kTokensFormatVersion;
    h.tokens = {2, -1, 1000, ""};
    ASSERT_OK_AND_ASSIGN(auto writer, DatasetWriter::Create(path, h, {}));
    for (uint64_t i = 0; i < kDocuments; ++i) {
      Record r;
      r.type = ContentType::kTokensUint16;
      r.source_name = absl::StrCat("docs.jsonl:", i + 1);
      for (uint32_t k = 0; k < DocumentIds(i); ++k) {
        r.payload.push_back(static_cast<uint8_t>((i + k) % 251));
        r.payload.push_back(0);
      }
      ASSERT_OK(writer->Append(r.view()));
    }
    if (!recorded.empty()) {
      std::string table;
      for (uint32_t n : recorded) {
        for (int b = 0; b < 4; ++b) table.push_back(static_cast<char>(n >> (8 * b)));
      }
      ASSERT_OK(writer->PutMeta(TokenLengthsKey(0), std::move(table)));
    }
    ASSERT_OK(writer->Finish(0));
  }
  static UploadOptions Chunked(uint64_t bytes) {
    UploadOptions o;
    o.chunk_bytes = bytes;
    return o;
  }
  // GETs of the records' objects (chunks, or the LMDB file) under `prefix`.
  uint64_t RecordGets(const std::string& prefix) const {
    return memory_->requests("GET", prefix + "/chunks/") +
           memory_->requests("GET", prefix + "/data.mdb");
  }
  absl::StatusOr<RemoteManifest> ManifestAt(const std::string& prefix) const {
    std::optional<std::string> text =
        memory_->Object(bucket_, prefix + "/" + kRemoteManifestObject);
    if (!text.has_value()) return absl::NotFoundError(prefix + " has no manifest");
    return DecodeRemoteManifest(*text, prefix);
  }
  // Replaces the upload at `prefix`'s index by `edit` of it (re-encoded, with its document
  // lengths if it has any) and its manifest by `edit_manifest` of it, the manifest's index size
  // and checksum made to agree: a lie no checksum catches, only what the lengths must be.
  void Rewrite(const std::string& prefix, const std::function<void(RecordIndex&)>& edit,
               const std::function<void(RemoteManifest&)>& edit_manifest = nullptr) {
    ASSERT_OK_AND_ASSIGN(RemoteManifest m, ManifestAt(prefix));
    const std::string key = prefix + "/" + kRecordIndexObject;
    std::optional<std::string> bytes = memory_->Object(bucket_, key);
    ASSERT_TRUE(bytes.has_value());
    std::vector<uint64_t> files;
    for (const RemoteFile& f : m.files) files.push_back(f.bytes);
    ASSERT_OK_AND_ASSIGN(RecordIndex index, DecodeRecordIndex(*bytes, m.completion.sample_count,
                                                              files, m.document_lengths, key));
    edit(index);
    const std::string encoded = EncodeRecordIndex(index.locations, index.document_lengths);
    if (edit_manifest) edit_manifest(m);
    m.index_bytes = encoded.size();
    m.index_crc32c = RecordIndexChecksum(encoded);
    memory_->SetObject(bucket_, key, encoded);
    memory_->SetObject(bucket_, prefix + "/" + kRemoteManifestObject, EncodeRemoteManifest(m));
  }

  std::string tokens_;
  std::vector<uint32_t> lengths_;  // what the records hold
};

TEST_F(TokenStoreTest, TheDocumentLengthsTravelWithTheIndexAndOpeningFetchesNoRecord) {
  ASSERT_OK_AND_ASSIGN(auto local, DatasetReader::Open(tokens_));
  ASSERT_EQ(local->recorded_document_lengths(), lengths_);
  // In chunk objects (several), and as the LMDB file it is.
  for (const auto& [prefix, chunk_bytes] :
       std::vector<std::pair<std::string, uint64_t>>{{"chunked", 1 << 10}, {"files", 0}}) {
    SCOPED_TRACE(prefix);
    ASSERT_OK(Upload(tokens_, Url(prefix), config_, Chunked(chunk_bytes)).status());
    ASSERT_OK_AND_ASSIGN(RemoteManifest m, ManifestAt(prefix));
    EXPECT_EQ(m.version, kRemoteManifestVersionOfLengths) << "older readers must refuse it";
    EXPECT_TRUE(m.document_lengths);
    EXPECT_EQ(m.index_bytes, RecordIndexBytes(kDocuments, true));
    if (chunk_bytes > 0) {
      EXPECT_GE(m.files.size(), 4u) << "too few chunks to cross one";
    }

    ASSERT_OK_AND_ASSIGN(auto remote, OpenUrl(Url(prefix)));
    EXPECT_EQ(remote->recorded_document_lengths(), local->recorded_document_lengths());
    ASSERT_OK_AND_ASSIGN(std::vector<uint32_t> counted, DocumentLengths(*remote));
    EXPECT_EQ(counted, lengths_);
    EXPECT_EQ(RecordGets(prefix), 0u) << "the open or DocumentLengths fetched records";
    ASSERT_NE(remote->remote(), nullptr);
    EXPECT_EQ(remote->remote()->counters().records_fetched, 0u);
    // The records are there all the same, each as long as the table says.
    ASSERT_OK_AND_ASSIGN(ReadTxn txn, remote->BeginRead());
    for (uint64_t i : {uint64_t{1}, uint64_t{37}, kDocuments - 1}) {
      ASSERT_OK_AND_ASSIGN(RecordView r, txn.Get(i));
      EXPECT_EQ(r.payload.size(), 2 * lengths_[i]) << i;
    }

    // A rank given the manifest and index another rank fetched (the job's shared index) has the
    // lengths too, and asks the store nothing.
    ASSERT_OK_AND_ASSIGN(auto shared, DatasetReader::FetchStoreIndex(Url(prefix), [&] {
                           ReaderOptions o;
                           o.store_overrides.s3 = config_;
                           return o;
                         }()));
    const uint64_t before = memory_->requests();
    ReaderOptions o;
    o.store_overrides.preloaded_index = shared;
    ASSERT_OK_AND_ASSIGN(auto ranked, OpenUrl(Url(prefix), o));
    EXPECT_EQ(ranked->recorded_document_lengths(), lengths_);
    EXPECT_EQ(memory_->requests(), before) << "a rank given the index asked the store";
  }
}

TEST_F(TokenStoreTest, ADatasetThatRecordedNoLengthsHasThemCountedAtUpload) {
  const std::string bare = dir_.Sub("bare.lmdb");
  ASSERT_NO_FATAL_FAILURE(WriteTokens(bare, {}));
  ASSERT_OK_AND_ASSIGN(auto local, DatasetReader::Open(bare));
  ASSERT_TRUE(local->recorded_document_lengths().empty());
  ASSERT_OK(Upload(bare, Url("bare"), config_).status());
  ASSERT_OK_AND_ASSIGN(auto remote, OpenUrl(Url("bare")));
  EXPECT_EQ(remote->recorded_document_lengths(), lengths_);
  EXPECT_EQ(RecordGets("bare"), 0u);
}

TEST_F(TokenStoreTest, ALocalTableThatLiesIsRefusedAtUploadAndNothingIsPublished) {
  // The same sum (which the local reader checks), two documents swapped.
  std::vector<uint32_t> lie = lengths_;
  ASSERT_NE(lie[1], lie[2]);
  std::swap(lie[1], lie[2]);
  const std::string liar = dir_.Sub("liar.lmdb");
  ASSERT_NO_FATAL_FAILURE(WriteTokens(liar, lie));
  ASSERT_OK(DatasetReader::Open(liar).status()) << "the local reader let it open";
  absl::StatusOr<UploadResult> up = Upload(liar, Url("liar"), config_);
  EXPECT_CODE(up, kDataLoss);
  EXPECT_THAT(up.status().message(),
              HasSubstr(absl::StrCat("record 1 holds ", lengths_[1],
                                     " ids, but the dataset's recorded lengths say ", lie[1])));
  EXPECT_CODE(ManifestAt("liar"), kNotFound);
}

TEST_F(TokenStoreTest, ALengthsTableDamagedInTheStoreIsDataLossNamingTheIndex) {
  ASSERT_OK(Upload(tokens_, Url(), config_).status());
  const std::string key = std::string("train/") + kRecordIndexObject;
  const std::string name = Url() + "/" + kRecordIndexObject;
  std::string index = *memory_->Object(bucket_, key);
  const std::string good = index;
  index[16 + 16 * kDocuments + 4] ^= 0x04;  // magic, count, entries: document 1's length
  memory_->SetObject(bucket_, key, index);
  auto damaged = OpenUrl(Url());
  EXPECT_CODE(damaged, kDataLoss);
  EXPECT_THAT(damaged.status().message(), HasSubstr(name + " is damaged"));
  // Cut short: no longer a length for every record.
  memory_->SetObject(bucket_, key, good.substr(0, good.size() - 8) + good.substr(good.size() - 4));
  auto cut = OpenUrl(Url());
  EXPECT_CODE(cut, kDataLoss);
  EXPECT_THAT(cut.status().message(), HasSubstr(name));
  EXPECT_EQ(RecordGets("train"), 0u);
}

TEST_F(TokenStoreTest, ALengthsTableThatLiesIsDataLossNamingTheObject) {
  ASSERT_OK(Upload(tokens_, Url(), config_).status());
  const std::string name = Url() + "/" + kRecordIndexObject;
  auto refused = [&](const std::string& why) {
    auto got = OpenUrl(Url());
    EXPECT_CODE(got, kDataLoss);
    EXPECT_THAT(got.status().message(), HasSubstr(name));
    EXPECT_THAT(got.status().message(), HasSubstr(why));
  };
  // One id too many: the lengths no longer add up to the records' payload.
  ASSERT_NO_FATAL_FAILURE(Rewrite("train", [](RecordIndex& x) { ++x.document_lengths[3]; }));
  refused("the document lengths add up to");
  // The right sum, all of it said to be one document: longer than its record.
  ASSERT_NO_FATAL_FAILURE(Rewrite("train", [](RecordIndex& x) {
    --x.document_lengths[3];
    uint32_t all = 0;
    for (uint32_t& n : x.document_lengths) all += std::exchange(n, 0);
    x.document_lengths[1] = all;
  }));
  refused("document 1 is said to hold");
  // An index without them under a manifest that says it carries them (of the index's size):
  // refused by the manifest's own word.
  ASSERT_NO_FATAL_FAILURE(Rewrite("train", [](RecordIndex& x) { x.document_lengths.clear(); }));
  auto bare = OpenUrl(Url());
  EXPECT_CODE(bare, kDataLoss);
  EXPECT_THAT(bare.status().message(), HasSubstr(Url() + "/" + kRemoteManifestObject));
  EXPECT_THAT(bare.status().message(),
              HasSubstr(absl::StrCat("an index of ", RecordIndexBytes(kDocuments, false),
                                     " bytes cannot hold ", kDocuments, " records")));
  EXPECT_EQ(RecordGets("train"), 0u);
}

TEST_F(TokenStoreTest, AnOlderUploadWithoutTheTableOpensAndItsDocumentsAreCountedByReading) {
  ASSERT_OK(Upload(tokens_, Url(), config_).status());
  // What ddpio wrote before document lengths: a version 3 manifest, the index without them.
  ASSERT_NO_FATAL_FAILURE(Rewrite(
      "train", [](RecordIndex& x) { x.document_lengths.clear(); },
      [](RemoteManifest& m) {
        m.version = kRemoteManifestVersionOfChunks;
        m.document_lengths = false;
      }));
  ASSERT_OK_AND_ASSIGN(auto remote, OpenUrl(Url()));
  EXPECT_TRUE(remote->recorded_document_lengths().empty());
  ASSERT_OK_AND_ASSIGN(std::vector<uint32_t> counted, DocumentLengths(*remote));
  EXPECT_EQ(counted, lengths_);
  EXPECT_GT(RecordGets("train"), 0u) << "counted without reading the records?";

  // Uploading the dataset again says what the old upload lacks; replacing it stores the table.
  absl::StatusOr<UploadResult> again = Upload(tokens_, Url(), config_);
  EXPECT_CODE(again, kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("uploaded without its document lengths"));
  UploadOptions replace;
  replace.overwrite = true;
  ASSERT_OK(Upload(tokens_, Url(), config_, replace).status());
  ASSERT_OK_AND_ASSIGN(auto fresh, OpenUrl(Url()));
  EXPECT_EQ(fresh->recorded_document_lengths(), lengths_);
  // The same dataset uploaded once more: there already, nothing sent.
  ASSERT_OK_AND_ASSIGN(UploadResult same, Upload(tokens_, Url(), config_));
  EXPECT_TRUE(same.already_there);
}

}  // namespace
}  // namespace ddpio::storage::remote
