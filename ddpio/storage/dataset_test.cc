// Writer + reader against real LMDB environments in temporary directories.
#include <lmdb.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/dataset_writer.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage {
namespace {

using testing::MakeRecord;

void ExpectSameRecord(const RecordView& got, const Record& want) {
  EXPECT_EQ(got.label, want.label);
  EXPECT_EQ(got.height, want.height);
  EXPECT_EQ(got.width, want.width);
  EXPECT_EQ(got.source_name, want.source_name);
  ASSERT_EQ(got.payload.size(), want.payload.size());
  EXPECT_TRUE(std::equal(got.payload.begin(), got.payload.end(), want.payload.begin()));
}

void ExpectAllRecords(const DatasetReader& reader, uint64_t n) {
  ASSERT_EQ(reader.size(), n);
  ASSERT_OK_AND_ASSIGN(ReadTxn txn, reader.BeginRead());
  for (uint64_t i = 0; i < n; ++i) {
    ASSERT_OK_AND_ASSIGN(RecordView v, txn.Get(i));
    ExpectSameRecord(v, MakeRecord(i));
  }
}

TEST(Dataset, RoundTripDirectoryLayout) {
  testing::TempDir dir;
  WriterOptions wo;
  wo.batch_records = 64;  // several commits
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 500, wo));
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("ds")));
  ExpectAllRecords(*reader, 500);
  EXPECT_EQ(reader->header().classes.size(), 7u);
  uint64_t payload = 0;
  for (uint64_t i = 0; i < 500; ++i) payload += MakeRecord(i).payload.size();
  EXPECT_EQ(reader->completion().payload_bytes, payload);
  EXPECT_FALSE(reader->no_lock());
}

TEST(Dataset, RoundTripSingleFileLayout) {
  testing::TempDir dir;
  WriterOptions wo;
  wo.single_file = true;
  ASSERT_OK(testing::WriteDataset(dir.Sub("one.lmdb"), 100, wo));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.Sub("one.lmdb")));
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("one.lmdb")));
  ExpectAllRecords(*reader, 100);
}

TEST(Dataset, OutgrowsItsInitialMap) {
  testing::TempDir dir;
  WriterOptions wo;
  wo.initial_map_size = 64 * 1024;  // 64 KiB; the data is ~1.4 MB
  wo.batch_records = 100;
  ASSERT_OK_AND_ASSIGN(auto writer,
                       DatasetWriter::Create(dir.Sub("ds"), testing::MakeHeader(), wo));
  for (uint64_t i = 0; i < 2500; ++i) {
    ASSERT_OK(writer->Append(MakeRecord(i).view()));
    if (writer->BatchFull()) {
      ASSERT_OK(writer->Commit());
    }
  }
  ASSERT_OK(writer->Finish(0));
  EXPECT_GE(writer->map_size(), uint64_t{1} << 20);  // it really grew
  writer.reset();
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("ds")));
  ExpectAllRecords(*reader, 2500);
}

TEST(Dataset, ConcurrentReadersOnManyThreads) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 1000));
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("ds")));
  std::atomic<int> errors{0}, checked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto txn = reader->BeginRead();
      if (!txn.ok()) {
        ++errors;
        return;
      }
      for (int pass = 0; pass < 3; ++pass) {
        for (uint64_t i = t; i < 1000; i += 3) {
          auto v = txn->Get(i);
          Record want = MakeRecord(i);
          if (!v.ok() || v->label != want.label ||
              !std::equal(v->payload.begin(), v->payload.end(), want.payload.begin(),
                          want.payload.end())) {
            ++errors;
          }
          ++checked;
        }
        txn->Reset();  // between "batches"; the next Get renews
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(checked.load(), 7000);
}

TEST(Dataset, SecondOpenInOneProcessSharesTheEnvironment) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 10));
  ASSERT_OK_AND_ASSIGN(auto a, DatasetReader::Open(dir.Sub("ds")));
  ASSERT_OK_AND_ASSIGN(auto b, DatasetReader::Open(dir.Sub("ds") + "/"));  // same dataset
  ExpectAllRecords(*a, 10);
  a.reset();  // b keeps the shared environment alive
  ExpectAllRecords(*b, 10);
  ReaderOptions other;
  other.readahead = true;
  EXPECT_CODE(DatasetReader::Open(dir.Sub("ds"), other), kFailedPrecondition);
}

TEST(Dataset, IncompleteDatasetIsRefused) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 50, {}, /*finish=*/false));
  auto reader = DatasetReader::Open(dir.Sub("ds"));
  EXPECT_CODE(reader, kFailedPrecondition);
  EXPECT_NE(reader.status().message().find("incomplete"), absl::string_view::npos)
      << reader.status();
}

TEST(Dataset, UnknownFormatVersionIsRefused) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 5));
  DatasetHeader h = testing::MakeHeader();
  h.format_version = kMaxFormatVersion + 1;
  ASSERT_OK(testing::PokeValue(dir.Sub("ds"), "meta", "dataset", EncodeHeader(h)));
  auto reader = DatasetReader::Open(dir.Sub("ds"));
  EXPECT_CODE(reader, kFailedPrecondition);
  EXPECT_NE(reader.status().message().find(absl::StrCat("version ", kMaxFormatVersion + 1)),
            absl::string_view::npos)
      << reader.status();
}

TEST(Dataset, CorruptPayloadNamesIndexAndKey) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 40));
  std::string raw;
  ASSERT_OK(testing::ReadRawValue(dir.Sub("ds"), "samples", testing::SampleKey(17), &raw));
  raw[raw.size() / 2] ^= 0x40;
  ASSERT_OK(testing::PokeValue(dir.Sub("ds"), "samples", testing::SampleKey(17), raw));
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("ds")));
  ASSERT_OK_AND_ASSIGN(ReadTxn txn, reader->BeginRead());
  EXPECT_OK(txn.Get(16));
  auto bad = txn.Get(17);
  EXPECT_CODE(bad, kDataLoss);
  EXPECT_NE(bad.status().message().find("record 17 (key 0000000000000011)"),
            absl::string_view::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("checksum"), absl::string_view::npos) << bad.status();
  EXPECT_OK(txn.Get(18));  // one bad record does not poison the transaction
}

TEST(Dataset, TruncatedRecordIsDataLoss) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 10));
  std::string raw;
  ASSERT_OK(testing::ReadRawValue(dir.Sub("ds"), "samples", testing::SampleKey(3), &raw));
  ASSERT_OK(testing::PokeValue(dir.Sub("ds"), "samples", testing::SampleKey(3),
                               raw.substr(0, raw.size() - 100)));
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("ds")));
  auto bad = reader->ReadCopy(3);
  EXPECT_CODE(bad, kDataLoss);
  EXPECT_NE(bad.status().message().find("truncated"), absl::string_view::npos) << bad.status();
}

TEST(Dataset, MissingRecordIsDataLossAtOpen) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 10));
  ASSERT_OK(testing::PokeValue(dir.Sub("ds"), "samples", testing::SampleKey(4), std::nullopt));
  EXPECT_CODE(DatasetReader::Open(dir.Sub("ds")), kDataLoss);
}

TEST(Dataset, OutOfRangeIndexIsInvalidArgument) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 3));
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("ds")));
  EXPECT_CODE(reader->ReadCopy(3), kInvalidArgument);
}

// Prefetch hints each record's pages once (overlaps merged), within the file, and leaves the
// records readable; a bad index is refused like Get's.
TEST(Dataset, PrefetchHintsEachRecordsPagesOnce) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 200));
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("ds")));
  ASSERT_OK_AND_ASSIGN(ReadTxn txn, reader->BeginRead());
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::vector<uint64_t> all(200);
  uint64_t stored = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    all[i] = i;
    absl::Span<const uint8_t> bytes;
    ASSERT_OK(txn.Get(i, &bytes).status());
    stored += bytes.size();
  }
  ASSERT_OK_AND_ASSIGN(uint64_t hinted, txn.Prefetch(all));
  EXPECT_GE(hinted, stored);                       // every record's bytes
  EXPECT_LE(hinted, reader->file_bytes() + page);  // but no page twice
  EXPECT_EQ(hinted % page, 0u);
  std::vector<uint64_t> twice = {7, 7, 7};
  ASSERT_OK_AND_ASSIGN(uint64_t one, txn.Prefetch({7}));
  ASSERT_OK_AND_ASSIGN(uint64_t three, txn.Prefetch(twice));
  EXPECT_EQ(one, three);
  EXPECT_GT(one, 0u);
  ASSERT_OK_AND_ASSIGN(uint64_t none, txn.Prefetch({}));
  EXPECT_EQ(none, 0u);
  txn.Reset();  // a reset transaction renews itself
  ASSERT_OK(txn.Prefetch({1, 2}).status());
  ASSERT_OK_AND_ASSIGN(RecordView v, txn.Get(2));
  ExpectSameRecord(v, MakeRecord(2));
  EXPECT_CODE(txn.Prefetch({5, 200}), kInvalidArgument);
}

TEST(Dataset, MissingAndForeignDatasets) {
  testing::TempDir dir;
  EXPECT_CODE(DatasetReader::Open(dir.Sub("nope")), kNotFound);
  std::filesystem::create_directory(dir.Sub("empty"));
  EXPECT_CODE(DatasetReader::Open(dir.Sub("empty")), kNotFound);
  // A plain LMDB environment without ddpio's databases.
  MDB_env* env = nullptr;
  mdb_env_create(&env);
  std::filesystem::create_directory(dir.Sub("plain"));
  ASSERT_EQ(mdb_env_open(env, dir.Sub("plain").c_str(), 0, 0644), 0);
  mdb_env_close(env);
  EXPECT_CODE(DatasetReader::Open(dir.Sub("plain")), kFailedPrecondition);
}

TEST(Dataset, CreateRefusesAnExistingPath) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("ds"), 3));
  auto again = DatasetWriter::Create(dir.Sub("ds"), testing::MakeHeader(), {});
  EXPECT_CODE(again, kAlreadyExists);
  // The library says what to do in words and names the setting; the CLI adds its flag.
  EXPECT_EQ(again.status().message().find("--"), std::string_view::npos) << again.status();
  EXPECT_EQ(SettingsOf(again.status()), (std::vector<std::string>{"resume"}));
}

TEST(Dataset, ResumeAfterLostBatchContinuesExactly) {
  testing::TempDir dir;
  WriterOptions wo;
  wo.batch_records = 32;
  {
    ASSERT_OK_AND_ASSIGN(auto w, DatasetWriter::Create(dir.Sub("ds"), testing::MakeHeader(), wo));
    for (uint64_t i = 0; i < 100; ++i) {
      ASSERT_OK(w->Append(MakeRecord(i).view()));
      if (w->BatchFull()) {
        ASSERT_OK(w->Commit());
      }
    }
    EXPECT_EQ(w->committed_count(), 96u);  // 4 records pending are lost with the writer
  }
  ASSERT_OK_AND_ASSIGN(auto w, DatasetWriter::Resume(dir.Sub("ds"), testing::MakeHeader(), wo));
  ASSERT_EQ(w->committed_count(), 96u);
  for (uint64_t i = w->record_count(); i < 300; ++i) {
    ASSERT_OK(w->Append(MakeRecord(i).view()));
    if (w->BatchFull()) {
      ASSERT_OK(w->Commit());
    }
  }
  ASSERT_OK(w->Finish(0));
  w.reset();
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(dir.Sub("ds")));
  ExpectAllRecords(*reader, 300);
  uint64_t payload = 0;
  for (uint64_t i = 0; i < 300; ++i) payload += MakeRecord(i).payload.size();
  EXPECT_EQ(reader->completion().payload_bytes, payload);
}

TEST(Dataset, ResumeRefusesCompleteOrForeignDatasets) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("done"), 5));
  EXPECT_CODE(DatasetWriter::Resume(dir.Sub("done"), testing::MakeHeader(), {}), kAlreadyExists);
  ASSERT_OK(testing::WriteDataset(dir.Sub("partial"), 5, {}, /*finish=*/false));
  DatasetHeader other = testing::MakeHeader();
  other.source_fingerprint = "another source";
  EXPECT_CODE(DatasetWriter::Resume(dir.Sub("partial"), other, {}), kFailedPrecondition);
  EXPECT_CODE(DatasetWriter::Resume(dir.Sub("absent"), other, {}), kNotFound);
  // A finished dataset resumed with other options is another conversion, not "already complete".
  EXPECT_CODE(DatasetWriter::Resume(dir.Sub("done"), other, {}), kFailedPrecondition);
  // A folder without data.mdb (e.g. a sharded dataset's) is refused and left without one.
  std::filesystem::create_directories(dir.Sub("folder"));
  EXPECT_CODE(DatasetWriter::Resume(dir.Sub("folder"), other, {}), kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("folder/data.mdb")));
}

TEST(Dataset, ResumeContinuesFromTheProgressEntryOrRefusesAMangledOne) {
  testing::TempDir dir;
  const std::string path = dir.Sub("ds");
  ASSERT_OK(testing::WriteDataset(path, 5, {}, /*finish=*/false));
  // Both counts are taken from the entry: the payload bytes carry on into the completion.
  ASSERT_OK(testing::PokeValue(path, "meta", "writer", R"({"payload_bytes":777,"records":5})"));
  {
    ASSERT_OK_AND_ASSIGN(auto w, DatasetWriter::Resume(path, testing::MakeHeader(), {}));
    EXPECT_EQ(w->committed_count(), 5u);
    ASSERT_OK(w->Append(MakeRecord(5).view()));
    ASSERT_OK(w->Finish(0));
  }
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(path));
  EXPECT_EQ(reader->completion().payload_bytes, 777 + MakeRecord(5).payload.size());
  reader.reset();

  ASSERT_OK(testing::WriteDataset(dir.Sub("partial"), 5, {}, /*finish=*/false));
  const std::vector<std::pair<std::string, std::string>> mangled = {
      {R"({"payload_bytes":777,"records":-5})", ""},
      {"[5,777]", ""},
      {R"({"payload_bytes":777,"rec)", " (the entry is not valid JSON)"},
      {R"({"payload_bytes":777,"records":5,"x":)" + std::string(100, '[') + std::string(100, ']') +
           "}",
       " (the entry is not valid: its JSON nests deeper than 64 levels)"}};
  for (const auto& [entry, why] : mangled) {
    ASSERT_OK(testing::PokeValue(dir.Sub("partial"), "meta", "writer", entry));
    auto w = DatasetWriter::Resume(dir.Sub("partial"), testing::MakeHeader(), {});
    EXPECT_CODE(w, kDataLoss) << entry;
    EXPECT_EQ(w.status().message(),
              absl::StrCat(dir.Sub("partial"), ": writer progress entry is malformed", why))
        << entry;
  }
}

TEST(Dataset, MetadataCommitsWithItsBatch) {
  testing::TempDir dir;
  {
    ASSERT_OK_AND_ASSIGN(auto w, DatasetWriter::Create(dir.Sub("ds"), testing::MakeHeader(), {}));
    ASSERT_OK(w->Append(MakeRecord(0).view()));
    ASSERT_OK(w->PutMeta("progress", "1"));
    ASSERT_OK(w->Commit());
    ASSERT_OK(w->PutMeta("progress", "2"));  // never committed
    EXPECT_CODE(w->PutMeta("complete", "x"), kInvalidArgument);
  }
  ASSERT_OK_AND_ASSIGN(auto w, DatasetWriter::Resume(dir.Sub("ds"), testing::MakeHeader(), {}));
  ASSERT_OK_AND_ASSIGN(auto progress, w->GetMeta("progress"));
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(*progress, "1");
  EXPECT_EQ(w->committed_count(), 1u);
}

}  // namespace
}  // namespace ddpio::storage
