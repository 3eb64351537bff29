// The fixture of the tests against an object store: a bucket of its own per test and a local
// dataset of kRecords records to upload. The store is a real one (Ceph's RADOS Gateway,
// scripts/object-store.sh; ctest label s3) or, with DDPIO_TEST_STORE=memory, the in-memory store
// of tests/support/memory_object_store.h (no gateway, no AWS_* variables: ctest's
// storage_memory_store runs the same tests so). Test-only (not installed).
#ifndef DDPIO_STORAGE_REMOTE_REMOTE_GATEWAY_TEST_FIXTURE_H_
#define DDPIO_STORAGE_REMOTE_REMOTE_GATEWAY_TEST_FIXTURE_H_

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/environment.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/dataset_writer.h"
#include "ddpio/storage/s3/object_store.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/memory_object_store.h"
#include "tests/support/s3_gateway.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage::remote {

// A format 2 dataset (records not bound to it, no id) of n records: record i is MakeRecord(i)
// with its label shifted by `shift` and its payload bytes xor'ed with it — another dataset of
// exactly the same layout for every shift.
inline void WriteUnboundDataset(const std::string& path, uint64_t n, int shift) {
  DatasetHeader header = testing::MakeHeader();
  header.format_version = 2;
  ASSERT_OK_AND_ASSIGN(auto writer, DatasetWriter::Create(path, header, {}));
  for (uint64_t i = 0; i < n; ++i) {
    Record r = testing::MakeRecord(i);
    r.label = static_cast<int32_t>((r.label + shift) % 7);
    for (uint8_t& b : r.payload) b ^= static_cast<uint8_t>(shift);
    ASSERT_OK(writer->Append(r.view()));
    if (writer->BatchFull()) {
      ASSERT_OK(writer->Commit());
    }
  }
  ASSERT_OK(writer->Finish(0));
}

class RemoteDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UsesMemoryStore()) {
      memory_ = testing::MemoryStore::Create();
      config_ = memory_->Config();
    } else {
      DDPIO_SKIP_WITHOUT_S3();
      ASSERT_OK_AND_ASSIGN(config_, s3::S3ConfigFromEnvironment(CurrentEnvironment()));
    }
    ASSERT_OK_AND_ASSIGN(client_, s3::OpenObjectStore(config_));
    bucket_ = absl::StrCat("ddpio-remote-", ::getpid(), "-", counter_++);
    ASSERT_OK(client_->CreateBucket(bucket_));
    local_ = dir_.Sub("train.lmdb");
    ASSERT_OK(testing::WriteDataset(local_, kRecords));
  }
  // The in-memory store: with DDPIO_TEST_STORE=memory, or always in a fixture that says so.
  virtual bool UsesMemoryStore() const { return OnMemoryStore(); }
  static bool OnMemoryStore() {
    const char* store = std::getenv("DDPIO_TEST_STORE");
    return store != nullptr && std::string(store) == "memory";
  }
  // `url` opened on this test's store (not the environment's).
  absl::StatusOr<std::unique_ptr<DatasetReader>> OpenUrl(const std::string& url,
                                                         ReaderOptions options = {}) const {
    options.store_overrides.s3 = config_;
    return DatasetReader::Open(url, options);
  }
  std::string Url(const std::string& prefix = "train") const {
    return absl::StrCat("s3://", bucket_, "/", prefix);
  }

  // Every record read through `url` equals the local one.
  void ExpectSameRecords(const std::string& url, const ReaderOptions& options = {}) {
    ASSERT_OK_AND_ASSIGN(auto local, DatasetReader::Open(local_));
    ASSERT_OK_AND_ASSIGN(auto remote, OpenUrl(url, options));
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
  std::shared_ptr<testing::MemoryStore> memory_;  // with DDPIO_TEST_STORE=memory
  s3::S3Config config_;
  std::unique_ptr<s3::ObjectStore> client_;
  std::string bucket_;
};

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_REMOTE_GATEWAY_TEST_FIXTURE_H_
