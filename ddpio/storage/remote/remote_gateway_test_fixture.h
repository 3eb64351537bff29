// The fixture of the tests against a real object store (Ceph's RADOS Gateway,
// scripts/object-store.sh; ctest label s3): a bucket of its own per test and a local dataset of
// kRecords records to upload. Test-only (not installed).
#ifndef DDPIO_STORAGE_REMOTE_REMOTE_GATEWAY_TEST_FIXTURE_H_
#define DDPIO_STORAGE_REMOTE_REMOTE_GATEWAY_TEST_FIXTURE_H_

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/environment.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/s3/s3_client.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/s3_gateway.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage::remote {

class RemoteDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DDPIO_SKIP_WITHOUT_S3();
    ASSERT_OK_AND_ASSIGN(config_, s3::S3ConfigFromEnvironment(CurrentEnvironment()));
    ASSERT_OK_AND_ASSIGN(client_, s3::S3Client::Create(config_));
    bucket_ = absl::StrCat("ddpio-remote-", ::getpid(), "-", counter_++);
    ASSERT_OK(client_->CreateBucket(bucket_));
    local_ = dir_.Sub("train.lmdb");
    ASSERT_OK(testing::WriteDataset(local_, kRecords));
  }
  std::string Url(const std::string& prefix = "train") const {
    return absl::StrCat("s3://", bucket_, "/", prefix);
  }

  // Every record read through `url` equals the local one.
  void ExpectSameRecords(const std::string& url, const ReaderOptions& options = {}) {
    ASSERT_OK_AND_ASSIGN(auto local, DatasetReader::Open(local_));
    ASSERT_OK_AND_ASSIGN(auto remote, DatasetReader::Open(url, options));
    ASSERT_EQ(remote->size(), local->size());
    EXPECT_EQ(remote->header().classes, local->header().classes);
    EXPECT_EQ(remote->header().id, local->header().id);
    ASSERT_OK_AND_ASSIGN(ReadTxn lt, local->BeginRead());
    ASSERT_OK_AND_ASSIGN(ReadTxn rt, remote->BeginRead());
    std::vector<uint64_t> all;
    for (uint64_t i = 0; i < remote->size(); ++i) all.push_back(i);
    ASSERT_OK(rt.Prefetch(all).status());
    for (uint64_t i = 0; i < remote->size(); ++i) {
      ASSERT_OK_AND_ASSIGN(RecordView l, lt.Get(i));
      ASSERT_OK_AND_ASSIGN(RecordView r, rt.Get(i));
      EXPECT_EQ(r.label, l.label) << i;
      EXPECT_EQ(std::string(r.source_name), std::string(l.source_name)) << i;
      ASSERT_EQ(r.payload.size(), l.payload.size()) << i;
      EXPECT_TRUE(std::equal(r.payload.begin(), r.payload.end(), l.payload.begin())) << i;
    }
  }

  static constexpr uint64_t kRecords = 300;
  static inline int counter_ = 0;
  testing::TempDir dir_;
  std::string local_;
  s3::S3Config config_;
  std::unique_ptr<s3::S3Client> client_;
  std::string bucket_;
};

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_REMOTE_GATEWAY_TEST_FIXTURE_H_
