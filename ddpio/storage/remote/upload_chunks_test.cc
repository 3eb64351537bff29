// Chunk objects (docs/FORMAT.md, "In an object store"), against the gateway (label s3) and the
// in-memory store (ctest storage_memory_store):
//  - an upload puts whole records, back to back, into chunk objects of at most the chunk size,
//    spread over the prefixes asked for, and every record reads back as the local one (its
//    checksum bound to the key it was written with, which a chunk's key_first keeps); another
//    layout of the same dataset (chunk size or spread) is named as such, and replacing it writes
//    new objects, never over the old ones;
//  - large chunks end at a multiple of the block order's chunk, so its chunks lie in one object;
//  - a sharded dataset's chunks never mix two shards' records (their keys and salts differ);
//  - the LMDB files as they are (chunk size 0) are still written, as a version 2 manifest;
//  - an interrupted chunked upload sends only the chunks the store lacks;
//  - a record that changes under the upload is refused, and no manifest is written over it.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/remote/remote_gateway_test_fixture.h"
#include "ddpio/storage/remote/upload.h"
#include "ddpio/storage/shards.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddpio::storage::remote {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class UploadChunksTest : public RemoteDatasetTest {
 protected:
  absl::StatusOr<RemoteManifest> ManifestAt(const std::string& prefix) {
    DDPIO_ASSIGN_OR_RETURN(
        std::string text,
        client_->Get(bucket_, prefix + "/" + kRemoteManifestObject, kMaxRemoteManifestBytes));
    return DecodeRemoteManifest(text, prefix);
  }
  uint64_t LocalStoredBytes() {
    auto local = DatasetReader::Open(local_);
    EXPECT_OK(local.status());
    auto txn = (*local)->BeginRead();
    EXPECT_OK(txn.status());
    uint64_t total = 0;
    for (uint64_t i = 0; i < (*local)->size(); ++i) {
      absl::Span<const uint8_t> stored;
      EXPECT_OK(txn->Get(i, &stored).status());
      total += stored.size();
    }
    return total;
  }
  static UploadOptions Chunked(uint64_t bytes, int spread = 1) {
    UploadOptions o;
    o.chunk_bytes = bytes;
    o.spread_prefixes = spread;
    return o;
  }
};

TEST_F(UploadChunksTest, ChunkObjectsHoldWholeRecordsSpreadOverPrefixesAndReadBackAsLocal) {
  constexpr uint64_t kChunk = 8 << 10;
  ASSERT_OK(Upload(local_, Url(), config_, Chunked(kChunk, 4)).status());
  ASSERT_OK_AND_ASSIGN(RemoteManifest m, ManifestAt("train"));
  EXPECT_EQ(m.version, 3) << "a reader that knows no key_first must refuse it";
  ASSERT_GE(m.files.size(), 12u) << "too few chunks to see them spread";
  std::set<std::string> prefixes;
  uint64_t bytes = 0;
  for (const RemoteFile& f : m.files) {
    ASSERT_THAT(f.object, StartsWith("chunks/"));
    prefixes.insert(f.object.substr(0, f.object.rfind('/')));
    EXPECT_TRUE(f.bytes <= kChunk || f.records == 1) << f.object << ": " << f.bytes << " bytes";
    EXPECT_EQ(f.key_first, f.first) << "one LMDB file: a record's key is its index";
    ASSERT_OK_AND_ASSIGN(uint64_t size, client_->Size(bucket_, "train/" + f.object));
    EXPECT_EQ(size, f.bytes) << f.object;
    bytes += f.bytes;
  }
  EXPECT_EQ(prefixes.size(), 4u);
  EXPECT_EQ(bytes, LocalStoredBytes()) << "the chunks hold the records and nothing else";
  ExpectSameRecords(Url());
  // Record by record, and through a cache folder.
  ReaderOptions per_record;
  per_record.store_overrides.whole_chunks = false;
  ExpectSameRecords(Url(), per_record);
  ReaderOptions cached;
  cached.store_overrides.cache_dir = dir_.Sub("cache");
  ExpectSameRecords(Url(), cached);
  // The same upload again finds it there; another layout of it is named as such.
  ASSERT_OK_AND_ASSIGN(UploadResult again, Upload(local_, Url(), config_, Chunked(kChunk, 4)));
  EXPECT_TRUE(again.already_there);
  for (const UploadOptions& other : {Chunked(2 * kChunk, 4), Chunked(kChunk, 2)}) {
    auto relaid = Upload(local_, Url(), config_, other);
    EXPECT_CODE(relaid, kFailedPrecondition);
    EXPECT_THAT(relaid.status().message(),
                HasSubstr("holds this dataset already in another layout"));
  }
  // Replaced by another chunk size: new objects, never written over the ones a reader of the
  // first layout (its index, opened before) still reads.
  UploadOptions bigger = Chunked(2 * kChunk, 4);
  bigger.overwrite = true;
  ASSERT_OK(Upload(local_, Url(), config_, bigger).status());
  ASSERT_OK_AND_ASSIGN(RemoteManifest after, ManifestAt("train"));
  for (const RemoteFile& f : after.files) {
    for (const RemoteFile& before : m.files) EXPECT_NE(f.object, before.object);
  }
  ExpectSameRecords(Url());
}

// Chunk objects of more than kDefaultBlockChunkRecords records end at a multiple of it, so that
// the block order's chunks (128 records by default) never span two objects.
TEST_F(UploadChunksTest, LargeChunksHoldWholeBlocksOfTheBlockOrder) {
  ASSERT_OK_AND_ASSIGN(auto local, DatasetReader::Open(local_));
  ASSERT_OK_AND_ASSIGN(ReadTxn txn, local->BeginRead());
  uint64_t first_150 = 0;  // about 150 records a chunk: cut back to 128 each time
  for (uint64_t i = 0; i < 150; ++i) {
    absl::Span<const uint8_t> stored;
    ASSERT_OK(txn.Get(i, &stored).status());
    first_150 += stored.size();
  }
  ASSERT_OK(Upload(local_, Url(), config_, Chunked(first_150)).status());
  ASSERT_OK_AND_ASSIGN(RemoteManifest m, ManifestAt("train"));
  std::vector<uint64_t> firsts;
  for (const RemoteFile& f : m.files) firsts.push_back(f.first);
  EXPECT_EQ(firsts, (std::vector<uint64_t>{0, 128, 256}));
  ExpectSameRecords(Url());
}

TEST_F(UploadChunksTest, AShardedDatasetsChunksNeverMixTwoShards) {
  // The fixture's records as two shards of 130 and 170 (each shard's keys restart at 0).
  const std::string sharded = dir_.Sub("sharded");
  std::filesystem::create_directories(sharded);
  ASSERT_OK_AND_ASSIGN(auto one, DatasetReader::Open(local_));
  std::vector<Record> all;
  for (uint64_t i = 0; i < one->size(); ++i) {
    ASSERT_OK_AND_ASSIGN(Record r, one->ReadCopy(i));
    all.push_back(std::move(r));
  }
  const auto cut = all.begin() + 130;
  ASSERT_OK(testing::WriteRecords(sharded + "/" + ShardName(0, 2), {all.begin(), cut}, 7));
  ASSERT_OK(testing::WriteRecords(sharded + "/" + ShardName(1, 2), {cut, all.end()}, 7));
  std::ofstream(sharded + "/" + kShardManifest)
      << EncodeShardManifest({"fp", {{ShardName(0, 2), 130}, {ShardName(1, 2), 170}}});
  local_ = sharded;

  ASSERT_OK(Upload(local_, Url(), config_, Chunked(8 << 10)).status());
  ASSERT_OK_AND_ASSIGN(RemoteManifest m, ManifestAt("train"));
  bool second_shard_seen = false;
  for (const RemoteFile& f : m.files) {
    const bool in_second = f.first >= 130;
    EXPECT_TRUE(f.first + f.records <= 130 || in_second) << f.object << " spans both shards";
    if (in_second) {
      EXPECT_EQ(f.key_first, f.first - 130) << f.object;
      second_shard_seen = true;
    }
  }
  EXPECT_TRUE(second_shard_seen);
  ExpectSameRecords(Url());
}

TEST_F(UploadChunksTest, TheLmdbFilesAsTheyAreAreStillWrittenAsAVersionTwoManifest) {
  ASSERT_OK(Upload(local_, Url(), config_, Chunked(0)).status());
  ASSERT_OK_AND_ASSIGN(RemoteManifest m, ManifestAt("train"));
  EXPECT_EQ(m.version, 2) << "readers before chunk objects read this layout";
  ASSERT_EQ(m.files.size(), 1u);
  EXPECT_EQ(m.files[0].object, "data.mdb");
  ExpectSameRecords(Url());
  EXPECT_CODE(Upload(local_, Url("x"), config_, Chunked(0, 2)), kInvalidArgument);
  EXPECT_CODE(Upload(local_, Url("x"), config_, Chunked(1 << 20, 0)), kInvalidArgument);
  EXPECT_CODE(Upload(local_, Url("x"), config_, Chunked(1 << 20, 257)), kInvalidArgument);
}

// A dataset of no records has no chunk: its (empty) LMDB file goes up as it is, and reads back.
TEST_F(UploadChunksTest, ADatasetOfNoRecordsIsUploadedAsItsLmdbFile) {
  const std::string empty = dir_.Sub("empty.lmdb");
  ASSERT_OK(testing::WriteDataset(empty, 0));
  ASSERT_OK(Upload(empty, Url("empty"), config_, Chunked(8 << 10)).status());
  ASSERT_OK_AND_ASSIGN(RemoteManifest m, ManifestAt("empty"));
  EXPECT_EQ(m.version, 2);
  ASSERT_OK_AND_ASSIGN(auto remote, OpenUrl(Url("empty")));
  EXPECT_EQ(remote->size(), 0u);
}

TEST_F(UploadChunksTest, AnInterruptedChunkedUploadSendsOnlyTheChunksTheStoreLacks) {
  UploadOptions stop = Chunked(8 << 10, 2);
  int sent = 0;
  stop.progress = [&](const UploadProgress& p) { return p.stage != "uploading" || ++sent < 5; };
  EXPECT_CODE(Upload(local_, Url(), config_, stop), kCancelled);
  EXPECT_CODE(OpenUrl(Url()), kFailedPrecondition) << "no manifest yet";
  ASSERT_OK_AND_ASSIGN(UploadResult resumed, Upload(local_, Url(), config_, Chunked(8 << 10, 2)));
  ASSERT_OK_AND_ASSIGN(RemoteManifest m, ManifestAt("train"));
  uint64_t first_five = 0;
  for (size_t c = 0; c < 5; ++c) first_five += m.files[c].bytes;
  EXPECT_EQ(resumed.bytes_skipped, first_five) << "the chunks sent before were sent again";
  ExpectSameRecords(Url());
}

// The dataset replaced by another of the same layout (records of the same sizes, other bytes)
// while its chunks are being sent: what was indexed is not what would be sent.
TEST_F(UploadChunksTest, ARecordThatChangesUnderTheUploadIsRefusedAndNoManifestWritten) {
  const std::string a = dir_.Sub("a.lmdb"), b = dir_.Sub("b.lmdb");
  WriteUnboundDataset(a, kRecords, 0);
  WriteUnboundDataset(b, kRecords, 3);
  UploadOptions o = Chunked(8 << 10);
  bool replaced = false;
  o.progress = [&](const UploadProgress& p) {
    if (p.stage == "uploading" && !replaced) {
      replaced = true;
      std::filesystem::copy_file(b + "/data.mdb", a + "/data.mdb",
                                 std::filesystem::copy_options::overwrite_existing);
    }
    return true;
  };
  auto changed = Upload(a, Url(), config_, o);
  ASSERT_TRUE(replaced);
  EXPECT_CODE(changed, kAborted);
  EXPECT_THAT(changed.status().message(), HasSubstr("changed while it was uploaded"));
  EXPECT_CODE(client_->Size(bucket_, "train/ddpio-remote.json"), kNotFound);
}

}  // namespace
}  // namespace ddpio::storage::remote
