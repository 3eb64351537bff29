// Hostile testing, round 3, against a real object store (ctest label s3): what made uploads
// report success over broken data and let one dataset be read as another.
//  - Two datasets whose layouts agree (records of the same sizes at the same offsets, as format
//    1/2 datasets with no id easily are) are told apart: by an upload over the other, and by a
//    cache folder both are read through.
//  - A cache file is checked even when the reader does not verify checksums.
//  - Two uploads to one prefix: the second is refused while the first runs; an object replaced
//    under an upload fails it and withdraws its manifest; a lock left by a dead upload is taken
//    over once its lease has run out.
//  - A resumed upload sends again an object that another upload replaced meanwhile.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/dataset_writer.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/storage/remote/remote_gateway_test_fixture.h"
#include "ddpio/storage/remote/upload.h"
#include "ddpio/storage/remote/upload_lock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddpio::storage::remote {
namespace {

using ::testing::HasSubstr;

class UploadTest : public RemoteDatasetTest {
 protected:
  void SetUp() override {
    RemoteDatasetTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    a_ = dir_.Sub("a.lmdb");
    b_ = dir_.Sub("b.lmdb");
    WriteUnboundDataset(a_, kRecords, 0);
    WriteUnboundDataset(b_, kRecords, 3);
  }
  // Every record read through `url` is the one of the local dataset at `path`.
  void ExpectRecordsOf(const std::string& path, const std::string& url,
                       const ReaderOptions& options = {}) {
    local_ = path;
    ExpectSameRecords(url, options);
  }
  std::string a_, b_;
};

TEST_F(UploadTest, TheTwoDatasetsHaveTheSameLayoutSoOnlyTheirRecordsTellThemApart) {
  EXPECT_EQ(std::filesystem::file_size(a_ + "/data.mdb"),
            std::filesystem::file_size(b_ + "/data.mdb"));
  ASSERT_OK(Upload(a_, Url("a"), config_).status());
  ASSERT_OK(Upload(b_, Url("b"), config_).status());
  ASSERT_OK_AND_ASSIGN(std::string ia, client_->Get(bucket_, "a/ddpio-index.bin", 1 << 20));
  ASSERT_OK_AND_ASSIGN(std::string ib, client_->Get(bucket_, "b/ddpio-index.bin", 1 << 20));
  EXPECT_EQ(ia, ib) << "the layouts differ: the tests below would not reproduce the defects";
}

TEST_F(UploadTest, AnotherDatasetUploadedOverAPrefixReplacesItNotTakenForTheSame) {
  ASSERT_OK(Upload(a_, Url(), config_).status());
  EXPECT_CODE(Upload(b_, Url(), config_), kFailedPrecondition);
  UploadOptions o;
  o.overwrite = true;
  ASSERT_OK_AND_ASSIGN(UploadResult over, Upload(b_, Url(), config_, o));
  EXPECT_FALSE(over.already_there) << "B was taken for A: the store keeps A under B's name";
  ExpectRecordsOf(b_, Url());
  ASSERT_OK_AND_ASSIGN(UploadResult again, Upload(b_, Url(), config_));
  EXPECT_TRUE(again.already_there);
}

TEST_F(UploadTest, TwoDatasetsReadThroughOneCacheFolderEachGetTheirOwnRecords) {
  ASSERT_OK(Upload(a_, Url("a"), config_).status());
  ASSERT_OK(Upload(b_, Url("b"), config_).status());
  const std::string cache = dir_.Sub("cache");
  ReaderOptions o;
  o.store_overrides.cache_dir = cache;
  ExpectRecordsOf(a_, Url("a"), o);  // fills the folder with A's records
  ExpectRecordsOf(b_, Url("b"), o);
  ExpectRecordsOf(a_, Url("a"), o);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache),
                          std::filesystem::directory_iterator()),
            2);
}

TEST_F(UploadTest, ATamperedCacheFileIsCaughtEvenWithoutChecksumVerification) {
  ASSERT_OK(Upload(a_, Url(), config_).status());
  const std::string cache = dir_.Sub("cache");
  ReaderOptions o;
  o.verify_checksums = false;  // what plain `ddpio inspect` reads with
  o.store_overrides.cache_dir = cache;
  ExpectRecordsOf(a_, Url(), o);
  int tampered = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cache)) {
    // Record files only: the folder's `claims` file (chunk claims, docs/FORMAT.md) is empty.
    if (!e.is_regular_file() || e.path().filename() == "claims") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16);  // the record's label (docs/FORMAT.md): another valid class
    f.put('\x05');
    ++tampered;
  }
  ASSERT_EQ(tampered, static_cast<int>(kRecords));
  ExpectRecordsOf(a_, Url(), o);
  ASSERT_OK_AND_ASSIGN(auto remote, OpenUrl(Url(), o));
  ASSERT_OK_AND_ASSIGN(ReadTxn t, remote->BeginRead());
  ASSERT_OK(t.Get(0).status());
  EXPECT_EQ(remote->remote()->counters().refetches, 0u) << "the healed copy is in the folder";
}

TEST_F(UploadTest, ASecondUploadToAPrefixUnderUploadIsRefusedNamingTheFirst) {
  UploadOptions o;
  absl::Status second = absl::OkStatus();
  bool tried = false;
  o.progress = [&](const UploadProgress& p) {
    if (p.stage == "uploading" && !tried) {
      tried = true;
      second = Upload(b_, Url(), config_).status();
    }
    return true;
  };
  ASSERT_OK(Upload(a_, Url(), config_, o).status());
  ASSERT_TRUE(tried);
  EXPECT_TRUE(absl::IsFailedPrecondition(second)) << second;
  EXPECT_THAT(second.message(), HasSubstr("another upload is writing to " + Url()));
  ExpectRecordsOf(a_, Url());
  EXPECT_CODE(client_->Size(bucket_, "train/ddpio-upload.lock"), kNotFound) << "lock left behind";
}

// As a store that ignores conditional writes would let happen: another writer replaces an object
// under a running upload. The upload fails, and publishes no manifest over the mix.
TEST_F(UploadTest, AnObjectReplacedDuringAnUploadFailsItAndNoManifestIsLeft) {
  UploadOptions o;
  o.progress = [&](const UploadProgress& p) {
    if (p.stage == "uploading") {
      EXPECT_OK(client_->Put(bucket_, "train/ddpio-index.bin", "someone else's index"));
    }
    return true;
  };
  auto raced = Upload(a_, Url(), config_, o);
  EXPECT_CODE(raced, kAborted);
  EXPECT_THAT(raced.status().message(), HasSubstr("ddpio-index.bin is no longer what this upload"));
  EXPECT_CODE(client_->Size(bucket_, "train/ddpio-remote.json"), kNotFound);
  EXPECT_CODE(OpenUrl(Url()), kFailedPrecondition);
}

TEST_F(UploadTest, ALockLeftByADeadUploadHoldsUntilItsLeaseRunsOut) {
  auto lock = [&](int64_t expires) {
    return absl::StrCat(R"({"format": "ddpio-upload-lock", "token": "dead", "host": "node7",)",
                        R"( "pid": 4242, "started": 1000, "expires": )", expires, "}");
  };
  UploadOptions o;
  o.lock.now = [] { return int64_t{5000}; };
  ASSERT_OK(client_->Put(bucket_, "train/ddpio-upload.lock", lock(6000)));
  auto held = Upload(a_, Url(), config_, o);
  EXPECT_CODE(held, kFailedPrecondition);
  EXPECT_THAT(held.status().message(), HasSubstr("node7, process 4242"));
  ASSERT_OK(client_->Put(bucket_, "train/ddpio-upload.lock", lock(4999)));
  ASSERT_OK(Upload(a_, Url(), config_, o).status());
  ExpectRecordsOf(a_, Url());
  // Not a lock at all: refused, naming it.
  ASSERT_OK(client_->Put(bucket_, "x/ddpio-upload.lock", "[[[[[[[["));
  EXPECT_THAT(Upload(a_, Url("x"), config_, o).status().message(),
              HasSubstr("is not a ddpio upload lock"));
}

TEST_F(UploadTest, AResumedUploadSendsAgainAnObjectAnotherUploadReplacedMeanwhile) {
  UploadOptions stop;
  stop.progress = [](const UploadProgress& p) { return p.stage != "uploading"; };
  EXPECT_CODE(Upload(a_, Url(), config_, stop), kCancelled);  // after its one chunk object
  UploadOptions o;
  o.overwrite = true;
  ASSERT_OK(Upload(b_, Url(), config_, o).status());  // B's, of the same size and name
  ASSERT_OK_AND_ASSIGN(UploadResult resumed, Upload(a_, Url(), config_, o));
  ASSERT_OK_AND_ASSIGN(std::string text,
                       client_->Get(bucket_, "train/ddpio-remote.json", kMaxRemoteManifestBytes));
  ASSERT_OK_AND_ASSIGN(RemoteManifest m, DecodeRemoteManifest(text, "manifest"));
  uint64_t record_objects = 0;
  for (const RemoteFile& f : m.files) record_objects += f.bytes;
  EXPECT_GE(resumed.bytes_sent, record_objects)
      << "the resumed upload trusted a record object that is B's";
  ExpectRecordsOf(a_, Url());
}

}  // namespace
}  // namespace ddpio::storage::remote
