#include "ddpio/storage/shards.h"

#include <filesystem>
#include <fstream>

#include "ddpio/storage/dataset_reader.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage {
namespace {

TEST(ShardManifest, RoundTripsAndRefusesWhatCouldEscapeTheFolder) {
  ShardManifest m{"abc-2-9", {{ShardName(0, 2), 5}, {ShardName(1, 2), 4}}};
  EXPECT_EQ(m.shards[1].path, "shard-00001-of-00002");
  ASSERT_OK_AND_ASSIGN(ShardManifest back, DecodeShardManifest(EncodeShardManifest(m)));
  ASSERT_EQ(back.shards.size(), 2u);
  EXPECT_EQ(back.shards[1].records, 4u);
  EXPECT_EQ(back.source_fingerprint, "abc-2-9");
  for (const char* path : {"../x", "a/b", ".", "..", ""}) {
    ShardManifest evil{"f", {{path, 1}}};
    EXPECT_CODE(DecodeShardManifest(EncodeShardManifest(evil)), kDataLoss) << path;
  }
  EXPECT_CODE(
      DecodeShardManifest(
          R"({"format":"ddpio-lmdb-shards","format_version":1,"source_fingerprint":"f","shards":[]})"),
      kDataLoss);
  EXPECT_CODE(
      DecodeShardManifest(
          R"({"format":"ddpio-lmdb-shards","format_version":3,"source_fingerprint":"f","shards":[]})"),
      kFailedPrecondition);
  EXPECT_CODE(DecodeShardManifest(R"({"format":"other"})"), kFailedPrecondition);
  EXPECT_CODE(
      DecodeShardManifest(
          R"({"format":"ddpio-lmdb-shards","format_version":1,"source_fingerprint":"f","shards":[{"path":"a","records":18446744073709551615},{"path":"b","records":1}]})"),
      kDataLoss);
  EXPECT_CODE(DecodeShardManifest("{"), kDataLoss);
}

// Found in issue 41: a manifest nested 100,000 deep (200 KB) parsed, then crashed whatever
// copied or dumped it. Refused as DataLoss, however deep and wherever the nesting is.
TEST(ShardManifest, AManifestNestedAHundredThousandDeepIsDataLossNotACrash) {
  const std::string manifest = EncodeShardManifest({"f", {{ShardName(0, 1), 3}}});
  ASSERT_OK(DecodeShardManifest(manifest));
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  for (const std::string& text :
       {"{\"x\":" + deep + "," + manifest.substr(1), "{\"x\":" + deep.substr(0, 100'000)}) {
    const absl::StatusOr<ShardManifest> r = DecodeShardManifest(text);
    EXPECT_CODE(r, kDataLoss);
    EXPECT_NE(r.status().message().find("shard manifest is not valid: its JSON nests deeper than"),
              absl::string_view::npos)
        << r.status();
  }
}

class ShardedDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    // 12 records as one dataset, and the same 12 as shards of 5 and 7.
    ASSERT_OK(testing::WriteDataset(dir_.Sub("one"), 12));
    std::filesystem::create_directories(dir_.Sub("sharded"));
    std::vector<Record> all;
    ASSERT_OK_AND_ASSIGN(auto one, DatasetReader::Open(dir_.Sub("one")));
    for (uint64_t i = 0; i < 12; ++i) {
      ASSERT_OK_AND_ASSIGN(Record r, one->ReadCopy(i));
      all.push_back(std::move(r));
    }
    ASSERT_OK(testing::WriteRecords(Shard(0), {all.begin(), all.begin() + 5}, 7));
    ASSERT_OK(testing::WriteRecords(Shard(1), {all.begin() + 5, all.end()}, 7));
    WriteManifest({{ShardName(0, 2), 5}, {ShardName(1, 2), 7}});
  }
  std::string Shard(int k) { return dir_.Sub("sharded/" + ShardName(k, 2)); }
  void WriteManifest(std::vector<ShardEntry> shards) {
    std::ofstream(dir_.Sub(std::string("sharded/") + kShardManifest))
        << EncodeShardManifest({"fp", shards});
  }
  testing::TempDir dir_;
};

TEST_F(ShardedDataset, ReadsAsOneDatasetInTheUnshardedOrder) {
  ASSERT_OK_AND_ASSIGN(auto one, DatasetReader::Open(dir_.Sub("one")));
  ASSERT_OK_AND_ASSIGN(auto sharded, DatasetReader::Open(dir_.Sub("sharded")));
  ASSERT_EQ(sharded->size(), 12u);
  EXPECT_EQ(sharded->shard_count(), 2u);
  EXPECT_EQ(sharded->data_files().size(), 2u);
  EXPECT_EQ(sharded->completion().payload_bytes, one->completion().payload_bytes);
  ASSERT_OK_AND_ASSIGN(ReadTxn a, one->BeginRead());
  ASSERT_OK_AND_ASSIGN(ReadTxn b, sharded->BeginRead());
  const std::vector<uint64_t> order = {11, 0, 4, 5, 6, 3, 10};  // across the shard boundary
  ASSERT_OK(b.Prefetch(order).status());
  for (uint64_t i : order) {
    absl::Span<const uint8_t> sa, sb;
    ASSERT_OK_AND_ASSIGN(RecordView x, a.Get(i, &sa));
    ASSERT_OK_AND_ASSIGN(RecordView y, b.Get(i, &sb));
    // The same record, byte for byte but for its checksum: bound to its key in its own file (a
    // shard's keys restart at 0), it differs where the index moved.
    ASSERT_EQ(sa.size(), sb.size()) << i;
    EXPECT_EQ(std::vector<uint8_t>(sa.begin() + 4, sa.end()),
              std::vector<uint8_t>(sb.begin() + 4, sb.end()))
        << i;
    EXPECT_EQ(x.label, y.label);
    b.Reset();
  }
  EXPECT_CODE(b.Get(12), kInvalidArgument);
  EXPECT_CODE(b.Prefetch(std::vector<uint64_t>{3, 12}), kInvalidArgument);
}

TEST_F(ShardedDataset, AManifestThatDisagreesWithItsShardsIsRefused) {
  WriteManifest({{ShardName(0, 2), 5}, {ShardName(1, 2), 6}});
  auto miscounted = DatasetReader::Open(dir_.Sub("sharded"));
  EXPECT_CODE(miscounted, kDataLoss);
  EXPECT_NE(miscounted.status().message().find("holds 7 records"), std::string::npos)
      << miscounted.status();
  WriteManifest({{ShardName(0, 2), 5}, {"shard-missing", 7}});
  EXPECT_CODE(DatasetReader::Open(dir_.Sub("sharded")), kNotFound);
}

TEST_F(ShardedDataset, AFolderOfShardsWithoutItsManifestIsAnUnfinishedConversion) {
  std::filesystem::remove(dir_.Sub(std::string("sharded/") + kShardManifest));
  auto reader = DatasetReader::Open(dir_.Sub("sharded"));
  EXPECT_CODE(reader, kFailedPrecondition);
  EXPECT_NE(reader.status().message().find("resume"), std::string::npos) << reader.status();
}

}  // namespace
}  // namespace ddpio::storage
