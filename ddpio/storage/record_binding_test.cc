// Records bound to their key and dataset (format 3, record layout 3): a record moved, swapped,
// duplicated or copied from another dataset — with its own checksum intact — is DataLoss wherever
// it is read; older datasets still read, and say what they do not catch. Shards know their place:
// a lying manifest is DataLoss naming the shard.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/dataset_writer.h"
#include "ddpio/storage/record.h"
#include "ddpio/storage/shards.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage {
namespace {

using ::testing::HasSubstr;

TEST(RecordBinding, ABoundRecordVerifiesOnlyUnderItsOwnKeyAndSalt) {
  const Record r = testing::MakeRecord(3);
  const RecordBinding mine{0x1234, 3, true};
  std::string bytes;
  ASSERT_OK(EncodeRecord(r.view(), &bytes, &mine));
  const auto span =
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  EXPECT_EQ(RecordLayoutOf(span), kRecordLayoutVersionBound);
  RecordView view;
  ASSERT_OK(DecodeRecord(span, true, &view, &mine));
  EXPECT_EQ(view.label, r.label);
  EXPECT_EQ(std::vector<uint8_t>(view.payload.begin(), view.payload.end()), r.payload);
  const RecordBinding other_key{0x1234, 4, true}, other_salt{0x1235, 3, true};
  EXPECT_CODE(DecodeRecord(span, true, &view, &other_key), kDataLoss);
  auto moved = DecodeRecord(span, true, &view, &other_salt);
  EXPECT_CODE(moved, kDataLoss);
  EXPECT_THAT(moved.message(), HasSubstr("another key's or another dataset's record"));
  // Checked without its binding is a caller's mistake, never a silent pass.
  EXPECT_CODE(DecodeRecord(span, true, &view, nullptr), kFailedPrecondition);
  // Without verification it parses (views need no checksum).
  ASSERT_OK(DecodeRecord(span, false, &view, nullptr));
}

TEST(RecordBinding, AnUnboundRecordWhereRecordsAreBoundIsDataLoss) {
  std::string bytes;
  ASSERT_OK(EncodeRecord(testing::MakeRecord(1).view(), &bytes));  // layout 1, its CRC fine
  const auto span =
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  RecordView view;
  const RecordBinding required{7, 1, true}, optional{7, 1, false};
  ASSERT_OK(DecodeRecord(span, true, &view, &optional));
  auto refused = DecodeRecord(span, true, &view, &required);
  EXPECT_CODE(refused, kDataLoss);
  EXPECT_THAT(refused.message(), HasSubstr("not bound to its key"));
}

class BoundDataset : public ::testing::Test {
 protected:
  // A dataset of n records of the default header (format 3 unless `version` says otherwise).
  std::string Make(const std::string& name, uint64_t n, int version = kBoundRecordsFormatVersion,
                   const std::string& fingerprint = "fixture") {
    const std::string path = dir_.Sub(name);
    DatasetHeader h = testing::MakeHeader();
    h.format_version = version;
    h.source_fingerprint = fingerprint;
    auto writer = DatasetWriter::Create(path, h, {});
    EXPECT_OK(writer.status());
    for (uint64_t i = 0; i < n; ++i) EXPECT_OK((*writer)->Append(testing::MakeRecord(i).view()));
    EXPECT_OK((*writer)->Finish(0));
    return path;
  }
  // Swaps the stored values of keys a and b, as `mdb_dump | (swap two lines) | mdb_load` does.
  void Swap(const std::string& path, uint64_t a, uint64_t b) {
    std::string va, vb;
    ASSERT_OK(testing::ReadRawValue(path, "samples", testing::SampleKey(a), &va));
    ASSERT_OK(testing::ReadRawValue(path, "samples", testing::SampleKey(b), &vb));
    ASSERT_OK(testing::PokeValue(path, "samples", testing::SampleKey(a), vb));
    ASSERT_OK(testing::PokeValue(path, "samples", testing::SampleKey(b), va));
  }
  absl::Status Read(const std::string& path, uint64_t index) {
    auto reader = DatasetReader::Open(path);
    if (!reader.ok()) return reader.status();
    return (*reader)->ReadCopy(index).status();
  }
  testing::TempDir dir_;
};

TEST_F(BoundDataset, SwappedRecordsAreDataLossNamingTheKey) {
  const std::string path = Make("db", 10);
  ASSERT_OK_AND_ASSIGN(auto before, DatasetReader::Open(path));
  EXPECT_EQ(before->header().format_version, kBoundRecordsFormatVersion);
  EXPECT_THAT(RecordProtection(before->header()), HasSubstr("bound to its key"));
  before.reset();
  Swap(path, 0, 1);
  for (uint64_t i : {0, 1}) {
    absl::Status st = Read(path, i);
    EXPECT_CODE(st, kDataLoss) << i;
    EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("record ", i, " (key ", IndexKeyHex(i), ")")));
  }
  EXPECT_OK(Read(path, 2));  // the others are fine
}

TEST_F(BoundDataset, ADuplicatedRecordAndOneCopiedFromAnotherDatasetAreDataLoss) {
  const std::string path = Make("db", 6);
  std::string three;
  ASSERT_OK(testing::ReadRawValue(path, "samples", testing::SampleKey(3), &three));
  ASSERT_OK(testing::PokeValue(path, "samples", testing::SampleKey(4), three));  // 3 twice, 4 lost
  EXPECT_CODE(Read(path, 4), kDataLoss);
  EXPECT_OK(Read(path, 3));
  // The same record at the same key of another conversion (another source fingerprint).
  const std::string other = Make("other", 6, kBoundRecordsFormatVersion, "another source");
  std::string theirs;
  ASSERT_OK(testing::ReadRawValue(other, "samples", testing::SampleKey(2), &theirs));
  ASSERT_OK(testing::PokeValue(path, "samples", testing::SampleKey(2), theirs));
  EXPECT_CODE(Read(path, 2), kDataLoss);
  // An older, unbound record slipped into a bound dataset.
  const std::string old = Make("old", 6, 1);
  std::string unbound;
  ASSERT_OK(testing::ReadRawValue(old, "samples", testing::SampleKey(5), &unbound));
  ASSERT_OK(testing::PokeValue(path, "samples", testing::SampleKey(5), unbound));
  absl::Status st = Read(path, 5);
  EXPECT_CODE(st, kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("not bound to its key"));
}

TEST_F(BoundDataset, OlderDatasetsStillReadAndSayWhatTheyDoNotCatch) {
  const std::string path = Make("old", 4, 2);
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(path));
  EXPECT_EQ(reader->header().format_version, 2);
  EXPECT_THAT(RecordProtection(reader->header()), HasSubstr("not bound to its key (format 2)"));
  EXPECT_THAT(RecordProtection(reader->header()), HasSubstr("convert --from dataset"));
  reader.reset();
  Swap(path, 0, 1);
  EXPECT_OK(Read(path, 0));  // undetectable in format 2: why format 3 exists
}

// A sharded dataset written as the converter writes one: positioned shards, a version 2 manifest.
class ShardLies : public BoundDataset {
 protected:
  void SetUp() override {
    for (int s = 0; s < 3; ++s) WriteShard("sharded", s, 3, "whole", 4);
    WriteManifest("sharded", "whole", {0, 1, 2});
  }
  void WriteShard(const std::string& folder, int s, int count, const std::string& whole,
                  uint64_t records) {
    std::filesystem::create_directories(dir_.Sub(folder));
    DatasetHeader h = testing::MakeHeader();
    h.source_fingerprint = absl::StrCat(whole, "/part", s);
    h.shard_index = static_cast<uint64_t>(s);
    h.shard_count = static_cast<uint64_t>(count);
    h.dataset_fingerprint = whole;
    auto writer = DatasetWriter::Create(dir_.Sub(folder + "/" + ShardName(s, count)), h, {});
    ASSERT_OK(writer.status());
    for (uint64_t i = 0; i < records; ++i)
      ASSERT_OK((*writer)->Append(testing::MakeRecord(10 * s + i).view()));
    ASSERT_OK((*writer)->Finish(0));
  }
  // The manifest listing, in its places, the shards named by `order` (a lie unless 0, 1, 2).
  void WriteManifest(const std::string& folder, const std::string& whole,
                     const std::vector<int>& order) {
    ShardManifest m;
    m.source_fingerprint = whole;
    for (int s : order) {
      auto shard = DatasetReader::Open(dir_.Sub(folder + "/" + ShardName(s, 3)));
      ASSERT_OK(shard.status());
      m.shards.push_back({ShardName(s, 3), (*shard)->size(),
                          ContentDigest((*shard)->header(), (*shard)->completion())});
    }
    std::ofstream(dir_.Sub(folder + "/" + kShardManifest)) << EncodeShardManifest(m);
  }
};

TEST_F(ShardLies, TheTruthOpens) {
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir_.Sub("sharded")));
  EXPECT_EQ(reader->size(), 12u);
  ASSERT_OK_AND_ASSIGN(Record r, reader->ReadCopy(5));  // shard 1, key 1
  EXPECT_EQ(r.payload, testing::MakeRecord(11).payload);
}

TEST_F(ShardLies, AManifestPointingAtAnotherShardIsDataLossNamingIt) {
  WriteManifest("sharded", "whole", {0, 0, 2});  // shard-00001's place lists shard-00000
  auto opened = DatasetReader::Open(dir_.Sub("sharded"));
  EXPECT_CODE(opened, kDataLoss);
  EXPECT_THAT(opened.status().message(), HasSubstr("shard-00000-of-00003 is shard 0 of 3"));
  EXPECT_THAT(opened.status().message(), HasSubstr("lists it as shard 1 of 3"));
  WriteManifest("sharded", "whole", {1, 0, 2});  // two swapped
  EXPECT_CODE(DatasetReader::Open(dir_.Sub("sharded")), kDataLoss);
}

TEST_F(ShardLies, AShardCopiedInFromAnotherDatasetIsDataLossNamingIt) {
  for (int s = 0; s < 3; ++s) WriteShard("stranger", s, 3, "another", 4);
  std::filesystem::remove_all(dir_.Sub("sharded/" + ShardName(1, 3)));
  std::filesystem::copy(dir_.Sub("stranger/" + ShardName(1, 3)),
                        dir_.Sub("sharded/" + ShardName(1, 3)));
  // The manifest as it was: the digest gives the copy away even before its header does.
  auto opened = DatasetReader::Open(dir_.Sub("sharded"));
  EXPECT_CODE(opened, kDataLoss);
  EXPECT_THAT(opened.status().message(), HasSubstr(ShardName(1, 3)));
  // Even with a manifest rewritten to match the copy's digest, its header names its dataset.
  WriteManifest("sharded", "whole", {0, 1, 2});
  opened = DatasetReader::Open(dir_.Sub("sharded"));
  EXPECT_CODE(opened, kDataLoss);
  EXPECT_THAT(opened.status().message(), HasSubstr("belongs to another dataset"));
}

}  // namespace
}  // namespace ddpio::storage
