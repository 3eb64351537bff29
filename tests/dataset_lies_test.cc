// Structural lies in datasets the program converted: records swapped, duplicated or copied from
// another dataset (each with its own checksum intact), shard manifests that point at the wrong
// shards or at a shard of another dataset, restart-segment offsets forged to point at the wrong
// restart markers. A seeded campaign of random lies of each kind: `inspect --verify` must never
// say OK, the loader must never hand out the lie, and the error must name the record or shard.
// (The datasets that pass these checks are the ones they protect: format 3, manifest version 2.)
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/splitmix64.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/record.h"
#include "ddpio/storage/shards.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace ddpio {
namespace {

namespace fs = std::filesystem;
using testing::RunDdpio;
using testing::RunResult;

constexpr int kRecords = 24;
constexpr int kCasesPerKind = 6;

class DatasetLies : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    Must(RunDdpio({"synth", "--out", Sub("src"), "--classes", "3", "--per-class", "8", "--size",
                   "64", "--quiet"}));
    Must(RunDdpio({"synth", "--out", Sub("src2"), "--classes", "3", "--per-class", "8", "--size",
                   "64", "--seed", "9", "--quiet"}));
    Must(RunDdpio({"convert", "--src", Sub("src"), "--out", Sub("db"), "--quiet"}));
    Must(RunDdpio({"convert", "--src", Sub("src2"), "--out", Sub("other"), "--quiet"}));
    Must(RunDdpio(
        {"convert", "--src", Sub("src"), "--out", Sub("sharded"), "--shards", "3", "--quiet"}));
    Must(RunDdpio(
        {"convert", "--src", Sub("src2"), "--out", Sub("sharded2"), "--shards", "3", "--quiet"}));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Sub(const std::string& name) { return dir_->Sub(name); }
  static void Must(const RunResult& r) { ASSERT_EQ(r.exit_code, 0) << r.err; }

  // A fresh copy of a pristine dataset to lie in.
  std::string Copy(const std::string& name, int n) {
    const std::string to = Sub(absl::StrCat("case-", name, "-", n));
    fs::remove_all(to);
    fs::copy(Sub(name), to, fs::copy_options::recursive);
    return to;
  }
  std::string Raw(const std::string& db, uint64_t key) {
    std::string v;
    EXPECT_OK(testing::ReadRawValue(db, "samples", testing::SampleKey(key), &v));
    return v;
  }
  void Put(const std::string& db, uint64_t key, const std::string& v) {
    ASSERT_OK(testing::PokeValue(db, "samples", testing::SampleKey(key), v));
  }
  // The lie must be seen: verify fails naming `named`, and a loader epoch over it fails.
  void ExpectCaught(const std::string& db, const std::string& named, const std::string& what) {
    RunResult verify = RunDdpio({"inspect", db, "--verify", "--decode", "--quiet"});
    EXPECT_EQ(verify.exit_code, 1) << what << ": inspect --verify said\n"
                                   << verify.out << verify.err;
    EXPECT_NE((verify.out + verify.err).find(named), std::string::npos)
        << what << ": the report does not name " << named << "\n"
        << verify.out << verify.err;
    RunResult load = RunDdpio({"bench", "loader", "--data", db, "--workers", "1", "--batch-size",
                               "4", "--image-size", "16", "--epochs", "1", "--decode", "exact"});
    EXPECT_EQ(load.exit_code, 1) << what << ": the loader ran over it\n" << load.err;
    EXPECT_EQ(load.signal, 0) << what;
  }
  SplitMix64 rng_{20261125};
  static testing::TempDir* dir_;
};
testing::TempDir* DatasetLies::dir_ = nullptr;

TEST_F(DatasetLies, SwappedRecordsAreCaught) {
  for (int n = 0; n < kCasesPerKind; ++n) {
    const std::string db = Copy("db", n);
    const uint64_t a = rng_.Next() % kRecords,
                   b = (a + 1 + rng_.Next() % (kRecords - 1)) % kRecords;
    const std::string va = Raw(db, a), vb = Raw(db, b);
    Put(db, a, vb);
    Put(db, b, va);
    ExpectCaught(db, absl::StrCat("(key ", storage::IndexKeyHex(std::min(a, b)), ")"),
                 absl::StrCat("records ", a, " and ", b, " swapped"));
  }
}

TEST_F(DatasetLies, DuplicatedRecordsAndRecordsOfAnotherDatasetAreCaught) {
  for (int n = 0; n < kCasesPerKind; ++n) {
    const std::string db = Copy("db", 100 + n);
    const uint64_t to = rng_.Next() % kRecords;
    const bool foreign = n % 2 == 1;
    const uint64_t from = foreign ? to : (to + 1 + rng_.Next() % (kRecords - 1)) % kRecords;
    Put(db, to, Raw(foreign ? Sub("other") : db, from));
    ExpectCaught(db, absl::StrCat("(key ", storage::IndexKeyHex(to), ")"),
                 absl::StrCat(foreign ? "the other dataset's record " : "record ", from,
                              " written over ", to));
  }
}

TEST_F(DatasetLies, LyingShardManifestsAreCaught) {
  const std::string manifest_name = storage::kShardManifest;
  std::ifstream in(Sub("sharded/" + manifest_name));
  const std::string truth((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (int n = 0; n < kCasesPerKind; ++n) {
    const std::string db = Copy("sharded", 200 + n);
    std::string lie = truth;
    std::string named;
    const size_t a = rng_.Next() % 3, b = (a + 1 + rng_.Next() % 2) % 3;
    const std::string name_a = storage::ShardName(a, 3), name_b = storage::ShardName(b, 3);
    switch (n % 3) {
      case 0: {  // one place names another shard (the sed of the report)
        lie.replace(lie.find("\"" + name_b + "\""), name_b.size() + 2, "\"" + name_a + "\"");
        named = name_a;
        break;
      }
      case 1: {  // two places swapped
        const std::string marker = "\"@@\"";
        lie.replace(lie.find("\"" + name_a + "\""), name_a.size() + 2, marker);
        lie.replace(lie.find("\"" + name_b + "\""), name_b.size() + 2, "\"" + name_a + "\"");
        lie.replace(lie.find(marker), marker.size(), "\"" + name_b + "\"");
        named = "shard-";
        break;
      }
      default: {  // a shard of another dataset copied in, the manifest as it was
        fs::remove_all(db + "/" + name_a);
        fs::copy(Sub("sharded2/" + name_a), db + "/" + name_a, fs::copy_options::recursive);
        named = name_a;
        break;
      }
    }
    std::ofstream(db + "/" + manifest_name, std::ios::trunc) << lie;
    ExpectCaught(db, named, absl::StrCat("manifest lie ", n % 3, " on ", name_a, "/", name_b));
  }
}

TEST_F(DatasetLies, ForgedRestartSegmentOffsetsAreCaughtByVerify) {
  auto reader = storage::DatasetReader::Open(Sub("db"));
  ASSERT_OK(reader.status());
  const uint64_t salt = storage::RecordSalt((*reader)->header());
  int forged = 0;
  for (int n = 0; n < 3 * kCasesPerKind && forged < kCasesPerKind; ++n) {
    const std::string db = Copy("db", 300 + n);
    const uint64_t k = rng_.Next() % kRecords;
    const std::string stored = Raw(db, k);
    storage::RecordView view;
    ASSERT_OK(storage::DecodeRecord(
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(stored.data()), stored.size()),
        false, &view));
    storage::Record r = storage::Record::FromView(view);
    const size_t segments = r.segment_offsets.size() / 4;
    if (segments < 4) continue;  // too few restart segments to forge in this image
    // Point one segment at another segment's start: every offset still follows an RSTn marker.
    const size_t i = 1 + rng_.Next() % (segments - 2);
    const size_t j = n % 2 == 0 ? i + 1 : i - 1;
    std::copy(r.segment_offsets.begin() + 4 * j, r.segment_offsets.begin() + 4 * j + 4,
              r.segment_offsets.begin() + 4 * i);
    std::string bytes;
    const storage::RecordBinding binding{salt, k, true};
    ASSERT_OK(storage::EncodeRecord(r.view(), &bytes,
                                    &binding));  // a valid checksum: the forgery is in the offsets
    Put(db, k, bytes);
    RunResult verify = RunDdpio({"inspect", db, "--verify", "--quiet"});
    EXPECT_EQ(verify.exit_code, 1) << "offset " << i << " of record " << k << " forged:\n"
                                   << verify.out << verify.err;
    EXPECT_NE(verify.out.find(absl::StrCat("bad record ", k)), std::string::npos) << verify.out;
    EXPECT_NE(verify.out.find("segment offsets"), std::string::npos) << verify.out;
    ++forged;
  }
  EXPECT_EQ(forged, kCasesPerKind) << "too few segmented records to forge";
}

}  // namespace
}  // namespace ddpio
