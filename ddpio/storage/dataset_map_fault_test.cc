// A dataset whose file becomes unreadable while a reader has it mapped: every read of it is a
// DataLoss that says which file and why, the process lives on, and zeroed pages are never served
// as records. Before the guard turned bus errors into errors, each of these tests ended the
// process (exit 1 from the SIGBUS handler).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/internal/map_guard.h"
#include "ddpio/storage/shards.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"

namespace ddpio::storage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kRecords = 600;  // about 330 KB of records: most pages lie past 8 KiB
constexpr off_t kCutTo = 8192;      // the two meta pages

std::string Message(const absl::Status& status) { return std::string(status.message()); }

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Reads every record: all there before the damage.
void ExpectAllReadable(const DatasetReader& reader) {
  ASSERT_OK_AND_ASSIGN(ReadTxn txn, reader.BeginRead());
  for (uint64_t i = 0; i < reader.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(RecordView view, txn.Get(i));
    EXPECT_EQ(view.label, testing::MakeRecord(i).label);
  }
  EXPECT_OK(txn.CheckMapped());
}

// Another map of the same file, below the one LMDB makes — what a child of fork has: its
// parent's map of the dataset, inherited, next to its own. The reader's bounds and bus-error
// guard must be LMDB's map: taking the first map of the file in /proc/self/maps made every value
// "point outside the file" (a DataLoader worker of a long pytest session failed so, now and then).
TEST(DatasetMapFault, AnotherMapOfTheFileIsNotTakenForTheReaders) {
  testing::TempDir dir;
  const std::string db = dir.Sub("db"), file = db + "/data.mdb";
  ASSERT_OK(testing::WriteDataset(db, kRecords));
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  // Below where the kernel puts new maps (LMDB's goes there, top down), so that it comes first
  // in /proc/self/maps: 4 GiB under a fresh map — application memory in the sanitizer builds
  // too, where fixed low addresses are the sanitizers' own.
  void* probe = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  ::munmap(probe, 4096);
  const uintptr_t hint =
      (reinterpret_cast<uintptr_t>(probe) - (uintptr_t{4} << 30)) & ~uintptr_t{0xfff};
  void* other = ::mmap(reinterpret_cast<void*>(hint), static_cast<size_t>(st.st_size), PROT_READ,
                       MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(other, MAP_FAILED);
  {
    ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(db));
    ExpectAllReadable(*reader);
    const auto maps = internal::FileMappings(st.st_dev, st.st_ino);
    ASSERT_EQ(maps.size(), 2u);
    EXPECT_EQ(maps.front().first, other) << "the test's map is not the first: it proves nothing";
  }
  ::munmap(other, static_cast<size_t>(st.st_size));
}

TEST(DatasetMapFault, ATruncatedFileUnderAnOpenReaderIsDataLossAndStaysSo) {
  testing::TempDir dir;
  const std::string db = dir.Sub("db"), file = db + "/data.mdb";
  ASSERT_OK(testing::WriteDataset(db, kRecords));
  const std::vector<char> good = ReadAll(file);
  ASSERT_GT(good.size(), 200u * 1024);
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(db));
  ExpectAllReadable(*reader);
  ASSERT_OK_AND_ASSIGN(ReadTxn txn, reader->BeginRead());
  ASSERT_OK(txn.Get(kRecords - 1).status());

  ASSERT_EQ(::truncate(file.c_str(), kCutTo), 0);
  // The live transaction's records, a new transaction's, and every kind of read.
  for (uint64_t i : {kRecords - 1, kRecords / 2, uint64_t{3}}) {
    absl::StatusOr<RecordView> view = txn.Get(i);
    ASSERT_EQ(view.status().code(), absl::StatusCode::kDataLoss) << view.status();
    const std::string m = Message(view.status());
    EXPECT_THAT(m, HasSubstr(file));
    EXPECT_THAT(m, HasSubstr("record " + std::to_string(i) + " (key " + IndexKeyHex(i) + ")"));
    EXPECT_THAT(m, HasSubstr("truncated or replaced under the running process (8192 bytes now, " +
                             std::to_string(good.size()) + " when it was opened)"));
    EXPECT_THAT(m, HasSubstr("bus error at byte "));
    EXPECT_THAT(m, HasSubstr("`ddpio inspect --verify` checks every record"));
  }
  EXPECT_CODE(txn.CheckMapped(), kDataLoss);
  EXPECT_CODE(txn.Prefetch(std::vector<uint64_t>{0, 1}), kDataLoss);
  ASSERT_OK_AND_ASSIGN(ReadTxn fresh_txn, reader->BeginRead());
  EXPECT_CODE(fresh_txn.Get(0), kDataLoss);
  EXPECT_CODE(reader->ReadCopy(1), kDataLoss);

  // Poisoned: the file put back as it was (same inode) still reads as lost, with the same cause —
  // the map keeps the zeroed pages, which must never pass for records.
  {
    std::fstream out(file, std::ios::binary | std::ios::in | std::ios::out);
    out.write(good.data(), static_cast<std::streamsize>(good.size()));
  }
  for (uint64_t i = 0; i < kRecords; i += 37) {
    absl::StatusOr<Record> copy = reader->ReadCopy(i);
    ASSERT_EQ(copy.status().code(), absl::StatusCode::kDataLoss) << i;
    EXPECT_THAT(Message(copy.status()),
                HasSubstr("truncated or replaced under the running process"));
  }
}

TEST(DatasetMapFault, AFreshReaderOfTheCutFileIsRefusedAtOpen) {
  testing::TempDir dir;
  const std::string db = dir.Sub("db"), file = db + "/data.mdb";
  ASSERT_OK(testing::WriteDataset(db, kRecords));
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(db));
  ASSERT_EQ(::truncate(file.c_str(), kCutTo), 0);
  EXPECT_CODE(reader->ReadCopy(kRecords - 1), kDataLoss);
  // The first reader is still open (its environment shared): the open-time check sees the
  // short file before anything is read from the map.
  absl::StatusOr<std::unique_ptr<DatasetReader>> again = DatasetReader::Open(db);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kDataLoss) << again.status();
  EXPECT_THAT(Message(again.status()), HasSubstr("truncated"));
  EXPECT_THAT(Message(again.status()), HasSubstr(db));
  reader.reset();
  again = DatasetReader::Open(db);
  ASSERT_EQ(again.status().code(), absl::StatusCode::kDataLoss) << again.status();
  EXPECT_THAT(Message(again.status()), HasSubstr("truncated"));
}

// LMDB sent past the end of a file that is whole: corruption, not truncation. Nothing in a
// dataset that passes the open-time checks makes LMDB do this on cue, so the test reads the page
// past the end of the file through the reader's own map (LMDB maps the writer's map size, far
// beyond the file), as a swapped page number would.
TEST(DatasetMapFault, APagePastTheEndOfAWholeFileIsCorruptionNotTruncation) {
  testing::TempDir dir;
  const std::string db = dir.Sub("db"), file = db + "/data.mdb";
  ASSERT_OK(testing::WriteDataset(db, kRecords));
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  {
    ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(db));
    ExpectAllReadable(*reader);
    const void* base = nullptr;
    size_t mapped = 0;
    ASSERT_TRUE(internal::FindFileMapping(st.st_dev, st.st_ino, &base, &mapped));
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t past_end =
        (static_cast<size_t>(st.st_size) + page - 1) / page * page + 3 * page + 8;
    ASSERT_LT(past_end, mapped) << "the map ends with the file: nothing past its end to read";
    EXPECT_EQ(*(static_cast<const volatile uint8_t*>(base) + past_end), 0);  // a SIGBUS, handled

    ASSERT_OK_AND_ASSIGN(ReadTxn txn, reader->BeginRead());
    absl::StatusOr<RecordView> view = txn.Get(5);
    ASSERT_EQ(view.status().code(), absl::StatusCode::kDataLoss) << view.status();
    const std::string m = Message(view.status());
    EXPECT_THAT(m, HasSubstr(file));
    EXPECT_THAT(m, HasSubstr("record 5 (key " + IndexKeyHex(5) + ")"));
    EXPECT_THAT(m, HasSubstr("bus error at byte " + std::to_string(past_end) + ")"));
    EXPECT_THAT(m, HasSubstr("LMDB followed a page past the end of the file (" +
                             std::to_string(st.st_size) +
                             " bytes): the file is corrupt (e.g. pages overwritten or swapped)"));
    EXPECT_THAT(m, HasSubstr("`ddpio inspect --verify` checks every record"));
    EXPECT_THAT(m, Not(HasSubstr("truncated")));
    EXPECT_CODE(txn.CheckMapped(), kDataLoss);
    EXPECT_CODE(reader->ReadCopy(0), kDataLoss);
    // Another reader in this process would share the damaged map: refused while that lives.
    EXPECT_CODE(DatasetReader::Open(db), kDataLoss);
  }
  // The file itself is as it was: once the damaged map is gone, a new one reads every record.
  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(db));
  ExpectAllReadable(*reader);
}

// Each shard has its own map: a shard cut short is named, and the other shards still read.
TEST(DatasetMapFault, AShardCutShortIsNamedAndTheOtherShardsStillRead) {
  testing::TempDir dir;
  ASSERT_OK(testing::WriteDataset(dir.Sub("one"), kRecords));
  ASSERT_OK_AND_ASSIGN(auto one, DatasetReader::Open(dir.Sub("one")));
  std::vector<Record> all;
  for (uint64_t i = 0; i < kRecords; ++i) {
    ASSERT_OK_AND_ASSIGN(Record r, one->ReadCopy(i));
    all.push_back(std::move(r));
  }
  const std::string sharded = dir.Sub("sharded");
  std::filesystem::create_directories(sharded);
  const uint64_t half = kRecords / 2;
  ASSERT_OK(
      testing::WriteRecords(sharded + "/" + ShardName(0, 2), {all.begin(), all.begin() + half}, 7));
  ASSERT_OK(
      testing::WriteRecords(sharded + "/" + ShardName(1, 2), {all.begin() + half, all.end()}, 7));
  std::ofstream(sharded + "/" + kShardManifest)
      << EncodeShardManifest({"fp", {{ShardName(0, 2), half}, {ShardName(1, 2), kRecords - half}}});

  ASSERT_OK_AND_ASSIGN(auto reader, DatasetReader::Open(sharded));
  ExpectAllReadable(*reader);
  const std::string cut = sharded + "/" + ShardName(1, 2) + "/data.mdb";
  ASSERT_EQ(::truncate(cut.c_str(), kCutTo), 0);

  ASSERT_OK_AND_ASSIGN(ReadTxn txn, reader->BeginRead());
  absl::StatusOr<RecordView> view = txn.Get(kRecords - 1);
  ASSERT_EQ(view.status().code(), absl::StatusCode::kDataLoss) << view.status();
  const std::string m = Message(view.status());
  EXPECT_THAT(m, HasSubstr("record " + std::to_string(kRecords - 1) + " of " + sharded));
  EXPECT_THAT(m, HasSubstr("dataset file " + cut + " became unreadable while mapped"));
  EXPECT_THAT(m, HasSubstr("truncated or replaced under the running process"));
  EXPECT_CODE(txn.CheckMapped(), kDataLoss);  // this transaction read the cut shard
  txn.Reset();
  for (uint64_t i = 0; i < half; ++i) {
    ASSERT_OK_AND_ASSIGN(RecordView v, txn.Get(i));
    EXPECT_EQ(v.label, testing::MakeRecord(i).label);
  }
  EXPECT_OK(txn.CheckMapped());  // since the Reset, only the whole shard
  EXPECT_CODE(txn.Get(half), kDataLoss);
  EXPECT_CODE(txn.CheckMapped(), kDataLoss);
}

}  // namespace
}  // namespace ddpio::storage
