// The object-store dataset's own files: the record index and the manifest round-trip, and every
// lie or damage in them is DataLoss naming what is wrong; the local record cache serves what it
// was given, forgets what is erased or deleted under it, and keeps its byte budget.
#include "ddpio/storage/remote/remote_format.h"

#include <filesystem>
#include <string>
#include <vector>

#include "ddpio/storage/checksum.h"
#include "ddpio/storage/remote/record_cache.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage::remote {
namespace {

using ::testing::HasSubstr;

std::vector<RecordLocation> SomeIndex() {
  return {{0, 100, 4096}, {0, 250, 4196}, {1, 80, 8192}, {1, 1, 12000}};
}

TEST(RecordIndex, RoundTripsAndChecksEveryEntryAgainstItsFile) {
  const std::vector<uint64_t> files = {8192, 16384};
  const std::string bytes = EncodeRecordIndex(SomeIndex());
  EXPECT_EQ(bytes.size(), 20u + 4 * 16);
  ASSERT_OK_AND_ASSIGN(auto back, DecodeRecordIndex(bytes, 4, files, "idx"));
  EXPECT_EQ(back, SomeIndex());
  // A record past its file's end, a record in a file that does not exist.
  auto past = SomeIndex();
  past[1].offset = 8000;
  EXPECT_THAT(DecodeRecordIndex(EncodeRecordIndex(past), 4, files, "idx").status().message(),
              HasSubstr("record 1 (file 0, bytes 8000+250) lies outside"));
  auto nowhere = SomeIndex();
  nowhere[3].file = 2;
  EXPECT_CODE(DecodeRecordIndex(EncodeRecordIndex(nowhere), 4, files, "idx"), kDataLoss);
}

TEST(RecordIndex, DamageAndWrongCountsAreDataLoss) {
  const std::vector<uint64_t> files = {8192, 16384};
  std::string bytes = EncodeRecordIndex(SomeIndex());
  EXPECT_THAT(DecodeRecordIndex(bytes, 5, files, "s3://b/idx").status().message(),
              HasSubstr("s3://b/idx lists 4 records"));
  for (size_t at : {size_t{0}, size_t{9}, size_t{30}, bytes.size() - 1}) {
    std::string damaged = bytes;
    damaged[at] ^= 0x10;
    EXPECT_CODE(DecodeRecordIndex(damaged, 4, files, "idx"), kDataLoss) << "byte " << at;
  }
  EXPECT_CODE(DecodeRecordIndex(bytes.substr(0, bytes.size() - 16), 4, files, "idx"), kDataLoss);
  EXPECT_CODE(DecodeRecordIndex("", 0, files, "idx"), kDataLoss);
}

RemoteManifest SomeManifest() {
  RemoteManifest m;
  m.header.classes = {"cat", "dog"};
  m.header.source_kind = "imagefolder";
  m.header.id = "0123456789abcdef0123456789abcdef";
  m.completion.sample_count = 4;
  m.completion.payload_bytes = 431;
  m.files = {{"shard-00000-of-00002/data.mdb", 8192, 0, 2, 77, true},
             {"shard-00001-of-00002/data.mdb", 16384, 2, 2, 78, true}};
  m.index_bytes = 20 + 4 * 16;
  m.index_crc32c = 1234;
  m.uploaded_by = "0.2.0";
  return m;
}

TEST(RemoteManifest, RoundTrips) {
  ASSERT_OK_AND_ASSIGN(RemoteManifest back,
                       DecodeRemoteManifest(EncodeRemoteManifest(SomeManifest()), "m"));
  EXPECT_EQ(back.header.classes, SomeManifest().header.classes);
  EXPECT_EQ(back.header.id, SomeManifest().header.id);
  EXPECT_EQ(back.completion.sample_count, 4u);
  ASSERT_EQ(back.files.size(), 2u);
  EXPECT_EQ(back.files[1].object, "shard-00001-of-00002/data.mdb");
  EXPECT_EQ(back.files[1].first, 2u);
  EXPECT_EQ(back.files[1].salt, 78u);
  EXPECT_TRUE(back.files[1].bound);
  EXPECT_EQ(back.index_crc32c, 1234u);
}

TEST(RemoteManifest, LiesAreRefusedNamingWhatIsWrong) {
  auto refused = [](RemoteManifest m, const std::string& why) {
    auto got = DecodeRemoteManifest(EncodeRemoteManifest(m), "s3://b/p/ddpio-remote.json");
    EXPECT_CODE(got, kDataLoss);
    EXPECT_THAT(got.status().message(), HasSubstr(why));
  };
  RemoteManifest gap = SomeManifest();
  gap.files[1].first = 3;
  refused(gap, "starts at record 3, not 2");
  RemoteManifest count = SomeManifest();
  count.completion.sample_count = 5;
  refused(count, "its files hold 4 records; its completion marker says 5");
  RemoteManifest escape = SomeManifest();
  escape.files[0].object = "../other/data.mdb";
  refused(escape, "is not inside the prefix");
  RemoteManifest index = SomeManifest();
  index.index_bytes = 1000;
  refused(index, "an index of 1000 bytes cannot hold 4 records");
  for (const char* text :
       {"", "[]", "{\"format\": 3}", "{\"format\": \"ddpio-remote\"}", "not json"}) {
    EXPECT_CODE(DecodeRemoteManifest(text, "m"), kDataLoss) << text;
  }
  std::string newer = EncodeRemoteManifest(SomeManifest());
  newer.replace(newer.find("\"version\": 1"), 12, "\"version\": 9");
  EXPECT_CODE(DecodeRemoteManifest(newer, "m"), kFailedPrecondition);
}

TEST(RecordCache, ServesWhatItWasGivenForgetsWhatIsGoneAndKeepsItsBudget) {
  testing::TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto cache, RecordCache::Open(dir.path(), "ds-1", 1000));
  EXPECT_FALSE(cache->Get(7).has_value());
  cache->Put(7, std::string(300, 'a'));
  cache->Put(8, std::string(300, 'b'));
  ASSERT_TRUE(cache->Get(7).has_value());
  EXPECT_EQ(*cache->Get(7), std::string(300, 'a'));
  EXPECT_EQ(cache->bytes(), 600u);
  cache->Put(9, std::string(300, 'c'));
  cache->Put(10, std::string(300, 'd'));  // 1200 > 1000: the oldest (7) goes
  EXPECT_FALSE(cache->Get(7).has_value());
  EXPECT_TRUE(cache->Get(10).has_value());
  EXPECT_LE(cache->bytes(), 1000u);
  cache->Erase(8);
  EXPECT_FALSE(cache->Get(8).has_value());
  // Deleted under it by someone else: a miss, and writing again recreates the folders.
  std::filesystem::remove_all(cache->folder());
  EXPECT_FALSE(cache->Get(9).has_value());
  cache->Put(11, "again");
  EXPECT_EQ(cache->Get(11).value_or(""), "again");
  // A new process finds what is there, oldest first.
  ASSERT_OK_AND_ASSIGN(auto reopened, RecordCache::Open(dir.path(), "ds-1", 1000));
  EXPECT_EQ(reopened->Get(11).value_or(""), "again");
  EXPECT_EQ(reopened->bytes(), 5u);
  EXPECT_CODE(RecordCache::Open(dir.path(), "../escape", 10), kInvalidArgument);
  EXPECT_CODE(RecordCache::Open("/proc/version", "x", 10), kInvalidArgument);
}

}  // namespace
}  // namespace ddpio::storage::remote
