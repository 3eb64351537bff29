#include "ddpio/convert/caffe_lmdb.h"

#include <lmdb.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ddpio/convert/caffe_datum.h"
#include "ddpio/convert/convert.h"
#include "ddpio/loader/sample_processor.h"
#include "ddpio/storage/dataset_reader.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::convert {
namespace {

// Writes key -> value pairs into a fresh LMDB directory, as Caffe's convert_imageset does.
void WriteLmdb(const std::string& dir,
               const std::vector<std::pair<std::string, std::string>>& entries,
               unsigned db_flags = 0) {
  std::filesystem::create_directories(dir);
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, size_t{64} << 20), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0664), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, db_flags, &dbi), 0);
  for (const auto& [k, v] : entries) {
    MDB_val key{k.size(), const_cast<char*>(k.data())}, val{v.size(), const_cast<char*>(v.data())};
    ASSERT_EQ(mdb_put(txn, dbi, &key, &val, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

// Planes of a w x h image whose pixel (x, y) channel c is (x * 7 + y * 13 + c * 50 + seed) % 256,
// in Caffe's order: BGR planes (or one gray plane), CHW.
std::string Planes(int channels, int w, int h, int seed) {
  std::string data(static_cast<size_t>(channels) * w * h, '\0');
  for (int c = 0; c < channels; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const int rgb_channel = channels == 3 ? 2 - c : 0;  // plane 0 is blue
        data[(static_cast<size_t>(c) * h + y) * w + x] =
            static_cast<char>((x * 7 + y * 13 + rgb_channel * 50 + seed) % 256);
      }
  return data;
}

// A Caffe LMDB of raw colour, raw gray and encoded JPEG Datums imports with the Datums' labels,
// in key order; raw pixels arrive as RGB exactly, JPEGs byte for byte.
TEST(CaffeLmdb, ImportsRawAndEncodedDatumsWithTheirLabels) {
  testing::TempDir dir;
  const std::vector<uint8_t> jpeg = testing::MakeJpeg(40, 30, 3);
  const std::string jpeg_bytes(jpeg.begin(), jpeg.end());
  WriteLmdb(dir.Sub("caffe"),
            {
                {"00000000_a.jpg", EncodeCaffeDatum(3, 6, 5, Planes(3, 5, 6, 1), 4, false)},
                {"00000001_b.jpg", EncodeCaffeDatum(0, 0, 0, jpeg_bytes, 2, true)},
                {"00000002_c.png", EncodeCaffeDatum(1, 4, 3, Planes(1, 3, 4, 9), 0, false)},
            });
  ASSERT_OK_AND_ASSIGN(auto lmdb, storage::LmdbFile::Open(dir.Sub("caffe")));
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListCaffeLmdb(*lmdb));
  ASSERT_EQ(listing.entries.size(), 3u);
  EXPECT_EQ(listing.classes.size(), 5u);  // "0" .. "4"
  CaffeLmdbReader reader(lmdb.get());
  ConvertOptions o;
  o.out = dir.Sub("db");
  o.threads = 2;
  o.restart_interval = 0;  // encoded Datums keep their bytes, compared below
  o.reader = &reader;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
  EXPECT_EQ(s.records, 3u);

  ASSERT_OK_AND_ASSIGN(auto db, storage::DatasetReader::Open(dir.Sub("db")));
  ASSERT_OK_AND_ASSIGN(auto txn, db->BeginRead());
  ASSERT_OK_AND_ASSIGN(storage::RecordView raw, txn.Get(0));
  EXPECT_EQ(raw.label, 4);
  EXPECT_EQ(raw.source_name, "00000000_a.jpg");
  ASSERT_EQ(raw.type, storage::ContentType::kRawUint8);
  ASSERT_EQ(raw.width, 5u);
  ASSERT_EQ(raw.height, 6u);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 5; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(raw.payload[(y * 5 + x) * 3 + c], (x * 7 + y * 13 + c * 50 + 1) % 256)
            << x << "," << y << "," << c;
  ASSERT_OK_AND_ASSIGN(storage::RecordView encoded, txn.Get(1));
  EXPECT_EQ(encoded.label, 2);
  EXPECT_EQ(encoded.type, storage::ContentType::kJpeg);
  EXPECT_EQ(std::string(encoded.payload.begin(), encoded.payload.end()), jpeg_bytes);
  ASSERT_OK_AND_ASSIGN(storage::RecordView gray, txn.Get(2));
  EXPECT_EQ(gray.label, 0);
  ASSERT_EQ(gray.payload.size(), 3u * 4 * 3);
  EXPECT_EQ(gray.payload[(2 * 3 + 1) * 3 + 0], (1 * 7 + 2 * 13 + 9) % 256);
  EXPECT_EQ(gray.payload[(2 * 3 + 1) * 3 + 2], gray.payload[(2 * 3 + 1) * 3 + 0]);
  // Every record loads through the loader's path.
  loader::SampleProcessor processor;
  std::vector<uint8_t> px;
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(storage::RecordView r, txn.Get(i));
    EXPECT_OK(processor.DecodeWhole(r, &px));
  }
}

TEST(CaffeLmdb, ADatumThatDoesNotParseIsNamedByItsKey) {
  testing::TempDir dir;
  WriteLmdb(dir.Sub("caffe"), {{"00000000_ok", EncodeCaffeDatum(1, 1, 1, "x", 0, false)},
                               {"00000001_bad", std::string("\x22\xff\xff", 3)}});
  ASSERT_OK_AND_ASSIGN(auto lmdb, storage::LmdbFile::Open(dir.Sub("caffe")));
  auto listing = ListCaffeLmdb(*lmdb);
  EXPECT_CODE(listing, kDataLoss);
  EXPECT_NE(listing.status().message().find("00000001_bad"), std::string::npos) << listing.status();
  EXPECT_CODE(storage::LmdbFile::Open(dir.Sub("missing")), kNotFound);
}

// A database with duplicate keys (MDB_DUPSORT) holds two Datums under one key; the reader looks
// up by key and would store the first twice (one image lost, one duplicated). Refused, naming
// the key.
TEST(CaffeLmdb, DuplicateKeysAreRefusedNamingTheKey) {
  testing::TempDir dir;
  WriteLmdb(dir.Sub("caffe"),
            {{"00000000", EncodeCaffeDatum(1, 1, 1, "a", 0, false)},
             {"00000001", EncodeCaffeDatum(1, 1, 1, "b", 1, false)},
             {"00000001", EncodeCaffeDatum(1, 1, 1, "c", 2, false)}},
            MDB_DUPSORT);
  ASSERT_OK_AND_ASSIGN(auto lmdb, storage::LmdbFile::Open(dir.Sub("caffe")));
  auto listing = ListCaffeLmdb(*lmdb);
  EXPECT_CODE(listing, kInvalidArgument);
  EXPECT_NE(listing.status().message().find("key '00000001'"), std::string::npos)
      << listing.status();
  EXPECT_NE(listing.status().message().find("more than one Datum"), std::string::npos)
      << listing.status();
}

}  // namespace
}  // namespace ddpio::convert
