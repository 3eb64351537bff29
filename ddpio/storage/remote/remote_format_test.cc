// The object-store dataset's own files: the record index (with a token dataset's document
// lengths) and the manifest round-trip, every lie or damage in them is DataLoss naming what is
// wrong, and what names a dataset's content (the index checksum, the records' digest) tells
// datasets apart. (The record cache:
// record_cache_test.cc.)
#include "ddpio/storage/remote/remote_format.h"

#include <string>
#include <vector>

#include "ddpio/storage/checksum.h"
#include "ddpio/storage/dataset_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

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
  ASSERT_OK_AND_ASSIGN(auto back, DecodeRecordIndex(bytes, 4, files, false, "idx"));
  EXPECT_EQ(back.locations, SomeIndex());
  EXPECT_TRUE(back.document_lengths.empty()) << "an image dataset's index carries none";
  // A record past its file's end, a record in a file that does not exist.
  auto past = SomeIndex();
  past[1].offset = 8000;
  EXPECT_THAT(DecodeRecordIndex(EncodeRecordIndex(past), 4, files, false, "idx").status().message(),
              HasSubstr("record 1 (file 0, bytes 8000+250) lies outside"));
  auto nowhere = SomeIndex();
  nowhere[3].file = 2;
  EXPECT_CODE(DecodeRecordIndex(EncodeRecordIndex(nowhere), 4, files, false, "idx"), kDataLoss);
}

TEST(RecordIndex, DamageAndWrongCountsAreDataLoss) {
  const std::vector<uint64_t> files = {8192, 16384};
  std::string bytes = EncodeRecordIndex(SomeIndex());
  EXPECT_THAT(DecodeRecordIndex(bytes, 5, files, false, "s3://b/idx").status().message(),
              HasSubstr("s3://b/idx lists 4 records"));
  for (size_t at : {size_t{0}, size_t{9}, size_t{30}, bytes.size() - 1}) {
    std::string damaged = bytes;
    damaged[at] ^= 0x10;
    EXPECT_CODE(DecodeRecordIndex(damaged, 4, files, false, "idx"), kDataLoss) << "byte " << at;
  }
  EXPECT_CODE(DecodeRecordIndex(bytes.substr(0, bytes.size() - 16), 4, files, false, "idx"),
              kDataLoss);
  EXPECT_CODE(DecodeRecordIndex("", 0, files, false, "idx"), kDataLoss);
}

// SomeIndex's records holding documents of 2-byte ids: each fits its record (its ids' bytes at
// most the record's less its 28-byte header), 162 ids in all.
std::vector<uint32_t> SomeLengths() { return {36, 100, 26, 0}; }

TEST(RecordIndex, ATokenDatasetsIndexCarriesItsDocumentLengths) {
  const std::vector<uint64_t> files = {8192, 16384};
  const std::string bytes = EncodeRecordIndex(SomeIndex(), SomeLengths());
  EXPECT_EQ(bytes.size(), RecordIndexBytes(4, true));
  EXPECT_EQ(bytes.size(), 20u + 4 * 20);
  EXPECT_EQ(bytes.substr(0, 8), "DDPIDX02");
  ASSERT_OK_AND_ASSIGN(RecordIndex back, DecodeRecordIndex(bytes, 4, files, true, "idx"));
  EXPECT_EQ(back.locations, SomeIndex());
  EXPECT_EQ(back.document_lengths, SomeLengths());
  // The index the manifest does not say: lengths where it says none, none where it says some.
  EXPECT_THAT(DecodeRecordIndex(bytes, 4, files, false, "s3://b/idx").status().message(),
              HasSubstr("s3://b/idx carries document lengths; its manifest says it does not"));
  auto without = DecodeRecordIndex(EncodeRecordIndex(SomeIndex()), 4, files, true, "s3://b/idx");
  EXPECT_CODE(without, kDataLoss);
  EXPECT_THAT(without.status().message(), HasSubstr("s3://b/idx carries no document lengths"));
  // A table cut short (it no longer covers every record) or damaged.
  std::string cut = bytes;
  cut.erase(cut.size() - 8, 4);
  EXPECT_THAT(DecodeRecordIndex(cut, 4, files, true, "s3://b/idx").status().message(),
              HasSubstr("s3://b/idx lists 4 records in 96 bytes"));
  for (size_t at = 16 + 4 * 16; at < bytes.size() - 4; ++at) {  // every byte of the lengths
    std::string damaged = bytes;
    damaged[at] ^= 0x01;
    EXPECT_CODE(DecodeRecordIndex(damaged, 4, files, true, "idx"), kDataLoss) << "byte " << at;
  }
}

DatasetHeader TokenHeader() {
  DatasetHeader h;
  h.format_version = kTokensFormatVersion;
  h.source_kind = "api";
  h.id = "0123456789abcdef0123456789abcdef";
  h.tokens = {2, -1, 0, ""};
  return h;
}

TEST(RecordIndex, DocumentLengthsThatDoNotFitTheirRecordsOrDoNotAddUpAreDataLoss) {
  const DatasetHeader tokens = TokenHeader();
  DatasetCompletion completion{4, 2 * 162, 0};
  RecordIndex index{SomeIndex(), SomeLengths()};
  EXPECT_OK(CheckDocumentLengths(index, tokens, completion, "idx"));
  EXPECT_OK(CheckDocumentLengths({SomeIndex(), {}}, tokens, completion, "idx")) << "none: fine";
  auto refused = [&](const RecordIndex& lie, const DatasetHeader& h, const DatasetCompletion& c,
                     const std::string& why) {
    const absl::Status st = CheckDocumentLengths(lie, h, c, "s3://b/p/ddpio-index.bin");
    EXPECT_CODE(st, kDataLoss);
    EXPECT_THAT(st.message(), HasSubstr("s3://b/p/ddpio-index.bin"));
    EXPECT_THAT(st.message(), HasSubstr(why));
  };
  refused(index, tokens, {4, 2 * 162 + 2, 0},
          "the document lengths add up to 162 ids, but the records hold 326 bytes of 2-byte ids");
  // The same sum, one document longer than its record can hold.
  refused({SomeIndex(), {37, 100, 25, 0}}, tokens, completion,
          "document 0 is said to hold 37 ids, more than its record of 100 bytes holds");
  DatasetHeader images = tokens;
  images.format_version = 3;
  images.tokens = {};
  refused(index, images, completion, "not a token dataset");
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

// Round 3: the manifest's index checksum was the CRC of the whole index, trailing CRC included
// — the CRC-32C residue, one constant for every index — so "the index matches its manifest",
// the cache sub-folder's name and upload's "already there" checked nothing.
TEST(RemoteManifest, TheIndexChecksumTellsIndexesApart) {
  std::vector<RecordLocation> other = SomeIndex();
  other[2].length = 81;
  const std::string a = EncodeRecordIndex(SomeIndex()), b = EncodeRecordIndex(other);
  EXPECT_EQ(Crc32c(a.data(), a.size()), kCrc32cResidue) << "what version 1 wrote";
  EXPECT_EQ(Crc32c(b.data(), b.size()), kCrc32cResidue);
  EXPECT_NE(RecordIndexChecksum(a), RecordIndexChecksum(b));
  RemoteManifest m = SomeManifest();
  m.index_crc32c = RecordIndexChecksum(a);
  EXPECT_TRUE(m.MatchesIndex(a));
  EXPECT_FALSE(m.MatchesIndex(b)) << "another upload's index of the same size passed";
  ASSERT_OK_AND_ASSIGN(RemoteManifest back, DecodeRemoteManifest(EncodeRemoteManifest(m), "m"));
  EXPECT_FALSE(back.MatchesIndex(b));
}

TEST(RemoteManifest, TheRecordsDigestTellsApartDatasetsWhoseLayoutsAgree) {
  // Two datasets with records of the same sizes at the same offsets: the same index.
  const std::string r1 = "\x01\x02\x03\x04payload-a", r2 = "\x05\x06\x07\x08payload-b";
  auto digest = [](const std::vector<std::string>& records) {
    RecordsDigest d;
    for (const std::string& r : records)
      d.Add({reinterpret_cast<const uint8_t*>(r.data()), r.size()});
    return d.value();
  };
  EXPECT_NE(digest({r1, r1}), digest({r1, r2}));
  EXPECT_NE(digest({r1, r2}), digest({r2, r1})) << "order counts";
  EXPECT_EQ(digest({r1, r2}), digest({r1, r2}));
  RemoteManifest a = SomeManifest(), b = SomeManifest();
  a.records_digest = digest({r1, r1});
  b.records_digest = digest({r1, r2});
  a.header.id = b.header.id = "";  // format 1/2: no id to tell them apart
  EXPECT_NE(a.ContentName(7), b.ContentName(7)) << "two datasets would share a cache folder";
  EXPECT_EQ(a.ContentName(7), a.ContentName(7));
  EXPECT_NE(a.ContentName(7), a.ContentName(8));
  EXPECT_EQ(a.ContentName(7).find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-"),
            std::string::npos);
  ASSERT_OK_AND_ASSIGN(RemoteManifest back, DecodeRemoteManifest(EncodeRemoteManifest(b), "m"));
  EXPECT_EQ(back.records_digest, b.records_digest);
  EXPECT_TRUE(back.identifies_records());
}

TEST(RemoteManifest, VersionOneManifestsAreStillReadAndSayTheyCannotIdentifyRecords) {
  std::string v1 = EncodeRemoteManifest(SomeManifest());
  v1.replace(v1.find("\"version\": 2"), 12, "\"version\": 1");
  const size_t digest = v1.find("\"records_digest\"");
  ASSERT_NE(digest, std::string::npos);
  v1.erase(digest, v1.find('\n', digest) - digest + 1);
  ASSERT_OK_AND_ASSIGN(RemoteManifest old, DecodeRemoteManifest(v1, "m"));
  EXPECT_FALSE(old.identifies_records());
  // A version 2 manifest without its digest is damaged.
  std::string bare = EncodeRemoteManifest(SomeManifest());
  const size_t at = bare.find("\"records_digest\"");
  bare.erase(at, bare.find('\n', at) - at + 1);
  EXPECT_CODE(DecodeRemoteManifest(bare, "m"), kDataLoss);
}

// Chunk objects (version 3): a file's key_first round-trips; version 2 manifests carry none (0,
// what their LMDB files mean), and a version 2 manifest never gains one from a stray field.
TEST(RemoteManifest, ChunkObjectsKeepTheKeyTheirFirstRecordWasWrittenWith) {
  RemoteManifest chunked = SomeManifest();
  chunked.version = 3;
  chunked.files[0].object = "chunks/00/00000000";
  chunked.files[1].object = "chunks/03/00000001";
  chunked.files[1].salt = chunked.files[0].salt;  // chunks of one LMDB file
  chunked.files[1].key_first = 2;
  const std::string text = EncodeRemoteManifest(chunked);
  EXPECT_THAT(text, HasSubstr("\"key_first\": 2"));
  ASSERT_OK_AND_ASSIGN(RemoteManifest back, DecodeRemoteManifest(text, "m"));
  EXPECT_EQ(back.version, 3);
  EXPECT_EQ(back.files[1].key_first, 2u);
  EXPECT_EQ(back.files[1].object, "chunks/03/00000001");

  RemoteManifest files = SomeManifest();
  ASSERT_EQ(files.version, 2) << "an upload of LMDB files writes what older readers read";
  EXPECT_THAT(EncodeRemoteManifest(files), ::testing::Not(HasSubstr("key_first")));
  std::string stray = text;
  stray.replace(stray.find("\"version\": 3"), 12, "\"version\": 2");
  ASSERT_OK_AND_ASSIGN(RemoteManifest v2, DecodeRemoteManifest(stray, "m"));
  EXPECT_EQ(v2.files[1].key_first, 0u);
  std::string bad = text;
  bad.replace(bad.find("\"key_first\": 2"), 14, "\"key_first\": \"x\"");
  EXPECT_CODE(DecodeRemoteManifest(bad, "m"), kDataLoss);
  // Keys that neither start a file at 0 nor continue the file before: a record's key would move
  // with its place, and its checksum bind it to the wrong index.
  RemoteManifest shifted = chunked;
  shifted.files[1].key_first = 3;
  auto refused = DecodeRemoteManifest(EncodeRemoteManifest(shifted), "m");
  EXPECT_CODE(refused, kDataLoss);
  EXPECT_THAT(refused.status().message(), HasSubstr("neither starts a file (0) nor continues"));
  RemoteManifest restarted = chunked;  // a new LMDB file (a shard) starts at 0: fine
  restarted.files[1].key_first = 0;
  EXPECT_OK(DecodeRemoteManifest(EncodeRemoteManifest(restarted), "m").status());
  std::string missing = text;  // the field and the comma before it
  const size_t at = missing.find("\"key_first\": 2");
  const size_t comma = missing.rfind(',', at);
  missing.erase(comma, at + 14 - comma);
  EXPECT_CODE(DecodeRemoteManifest(missing, "m"), kDataLoss);
}

// Version 4: a token dataset's index carries its document lengths, 4 bytes a record more.
TEST(RemoteManifest, ATokenDatasetsManifestSaysItsIndexCarriesDocumentLengths) {
  RemoteManifest m = SomeManifest();
  m.version = kRemoteManifestVersionOfLengths;
  m.header = TokenHeader();
  m.document_lengths = true;
  m.index_bytes = RecordIndexBytes(4, true);
  const std::string text = EncodeRemoteManifest(m);
  EXPECT_THAT(text, HasSubstr("\"document_lengths\": true"));
  ASSERT_OK_AND_ASSIGN(RemoteManifest back, DecodeRemoteManifest(text, "m"));
  EXPECT_EQ(back.version, 4);
  EXPECT_TRUE(back.document_lengths);
  EXPECT_EQ(back.index_bytes, 20u + 4 * 20);
  RemoteManifest none = m;  // a version 4 manifest may say its index carries none
  none.document_lengths = false;
  none.index_bytes = RecordIndexBytes(4, false);
  ASSERT_OK_AND_ASSIGN(back, DecodeRemoteManifest(EncodeRemoteManifest(none), "m"));
  EXPECT_FALSE(back.document_lengths);

  auto refused = [](const std::string& text, const std::string& why) {
    auto got = DecodeRemoteManifest(text, "s3://b/p/ddpio-remote.json");
    EXPECT_CODE(got, kDataLoss);
    EXPECT_THAT(got.status().message(), HasSubstr("s3://b/p/ddpio-remote.json"));
    EXPECT_THAT(got.status().message(), HasSubstr(why));
  };
  RemoteManifest small = m;  // the index's size without the lengths
  small.index_bytes = RecordIndexBytes(4, false);
  refused(EncodeRemoteManifest(small), "an index of 84 bytes cannot hold 4 records");
  RemoteManifest images = SomeManifest();
  images.version = kRemoteManifestVersionOfLengths;
  images.document_lengths = true;
  images.index_bytes = RecordIndexBytes(4, true);
  refused(EncodeRemoteManifest(images), "not a token dataset");
  std::string missing = text;
  missing.replace(missing.find("\"document_lengths\": true"), 24, "\"lengths\": 1");
  refused(missing, "no index document_lengths");
  // Before version 4 the field means nothing: never a larger index from a stray field.
  std::string stray = EncodeRemoteManifest(none);
  stray.replace(stray.find("\"version\": 4"), 12, "\"version\": 3");
  stray.replace(stray.find("\"document_lengths\": false"), 25, "\"document_lengths\": true");
  ASSERT_OK_AND_ASSIGN(back, DecodeRemoteManifest(stray, "m"));
  EXPECT_FALSE(back.document_lengths);
  // Images keep the versions older readers read.
  EXPECT_EQ(kRemoteManifestVersionOfChunks, 3);
  EXPECT_EQ(kRemoteManifestVersionOfFiles, 2);
}

TEST(RemoteManifest, ADeeplyNestedManifestIsDataLossNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_CODE(DecodeRemoteManifest(deep, "m"), kDataLoss);
  std::string nested = EncodeRemoteManifest(SomeManifest());
  nested.replace(nested.find("\"uploaded_by\""), 0,
                 "\"x\": " + std::string(1000, '[') + std::string(1000, ']') + ",\n");
  EXPECT_THAT(DecodeRemoteManifest(nested, "s3://b/m").status().message(),
              HasSubstr("nests deeper than"));
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
  RemoteManifest huge = SomeManifest();  // each file within the limit, the two together not
  huge.files[0].records = kMaxRemoteRecords;
  huge.files[1].first = kMaxRemoteRecords;
  huge.files[1].records = kMaxRemoteRecords;
  huge.completion.sample_count = 2 * kMaxRemoteRecords;
  huge.index_bytes = 20 + 16 * huge.completion.sample_count;
  refused(huge, "the most a remote dataset may hold");
  RemoteManifest index = SomeManifest();
  index.index_bytes = 1000;
  refused(index, "an index of 1000 bytes cannot hold 4 records");
  for (const char* text :
       {"", "[]", "{\"format\": 3}", "{\"format\": \"ddpio-remote\"}", "not json"}) {
    EXPECT_CODE(DecodeRemoteManifest(text, "m"), kDataLoss) << text;
  }
  std::string newer = EncodeRemoteManifest(SomeManifest());
  newer.replace(newer.find("\"version\": 2"), 12, "\"version\": 9");
  EXPECT_CODE(DecodeRemoteManifest(newer, "m"), kFailedPrecondition);
}

}  // namespace
}  // namespace ddpio::storage::remote
