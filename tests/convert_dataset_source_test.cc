#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ddpio/convert/dataset_source.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/loader/sample_processor.h"
#include "gtest/gtest.h"
#include "tests/support/crashing_conversion.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"
#include "tools/inspect.h"
#include "tools/synth.h"

namespace ddpio::convert {
namespace {

using tools::RunSynth;
namespace fs = std::filesystem;

class DatasetSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(RunSynth({dir_.Sub("src"), 3, 12, 96, 7, 90, 2, false}));
    ASSERT_OK_AND_ASSIGN(listing_, ListImageFolder(dir_.Sub("src")));
  }
  ConvertOptions Options(const std::string& out) {
    ConvertOptions o;
    o.out = out;
    o.threads = 2;
    o.writer.batch_records = 5;  // several commits for 36 records
    o.restart_interval = 0;      // a dataset as earlier versions wrote it: original JPEG bytes
    return o;
  }
  // What a user of the dataset sees: every record's label, name, geometry and decoded crops.
  static void ExpectSameSamples(const std::string& a_path, const std::string& b_path) {
    ASSERT_OK_AND_ASSIGN(auto a, storage::DatasetReader::Open(a_path));
    ASSERT_OK_AND_ASSIGN(auto b, storage::DatasetReader::Open(b_path));
    ASSERT_EQ(a->size(), b->size());
    EXPECT_EQ(a->header().classes, b->header().classes);
    ASSERT_OK_AND_ASSIGN(auto ta, a->BeginRead());
    ASSERT_OK_AND_ASSIGN(auto tb, b->BeginRead());
    loader::SampleProcessor pa, pb;
    loader::AugmentOptions aug;
    aug.size = 48;
    for (uint64_t i = 0; i < a->size(); ++i) {
      ASSERT_OK_AND_ASSIGN(storage::RecordView x, ta.Get(i));
      ASSERT_OK_AND_ASSIGN(storage::RecordView y, tb.Get(i));
      EXPECT_EQ(x.label, y.label) << i;
      EXPECT_EQ(x.source_name, y.source_name) << i;
      EXPECT_EQ(x.width, y.width) << i;
      EXPECT_EQ(x.original_width, y.original_width) << i;
      EXPECT_EQ(x.original_height, y.original_height) << i;
      for (uint64_t epoch = 0; epoch < 2; ++epoch) {
        std::vector<uint8_t> want(48 * 48 * 3), got(48 * 48 * 3);
        ASSERT_OK(pa.Process(x, i, epoch, 3, aug, loader::DecodeMode::kExact, want.data()));
        ASSERT_OK(pb.Process(y, i, epoch, 3, aug, loader::DecodeMode::kExact, got.data()));
        ASSERT_EQ(got, want) << i << " epoch " << epoch;
      }
    }
  }
  static int SegmentedRecords(const std::string& path) {
    auto reader = storage::DatasetReader::Open(path);
    EXPECT_OK(reader);
    int n = 0;
    for (uint64_t i = 0; reader.ok() && i < (*reader)->size(); ++i) {
      auto r = (*reader)->ReadCopy(i);
      EXPECT_OK(r);
      if (r.ok() && !r->segment_offsets.empty() &&
          loader::RestartLayoutFromOffsets(r->payload, r->view().segment_offsets).ok()) {
        ++n;
      }
    }
    return n;
  }
  testing::TempDir dir_;
  SourceListing listing_;
};

TEST_F(DatasetSourceTest, ConvertingADatasetAddsRestartsAndKeepsEverySample) {
  ConvertOptions plain = Options(dir_.Sub("plain"));
  plain.shrink.max_side = 80;  // some records shrunk: their original size must survive
  ASSERT_OK(Convert(listing_, plain).status());
  ASSERT_OK_AND_ASSIGN(auto source, storage::DatasetReader::Open(dir_.Sub("plain")));
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListDataset(*source));
  EXPECT_EQ(listing.kind, "ddpio-dataset");
  EXPECT_EQ(listing.entries.size(), 36u);
  EXPECT_EQ(SegmentedRecords(dir_.Sub("plain")), 0);
  DatasetSourceReader reader(source.get());
  ConvertOptions o = Options(dir_.Sub("segmented"));
  o.restart_interval = 4;
  o.reader = &reader;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
  EXPECT_EQ(s.records, 36u);
  EXPECT_EQ(SegmentedRecords(dir_.Sub("segmented")), 36);
  ExpectSameSamples(dir_.Sub("plain"), dir_.Sub("segmented"));
  ASSERT_OK_AND_ASSIGN(auto shrunk, storage::DatasetReader::Open(dir_.Sub("segmented")));
  int with_original = 0;
  for (uint64_t i = 0; i < shrunk->size(); ++i)
    with_original += shrunk->ReadCopy(i)->original_width > 0;
  EXPECT_GT(with_original, 0);
}

TEST_F(DatasetSourceTest, InPlaceUpgradeResumesAfterACrashAndSwapsOnlyWhenComplete) {
  ASSERT_OK(Convert(listing_, Options(dir_.Sub("db"))).status());
  ASSERT_OK(Convert(listing_, Options(dir_.Sub("reference"))).status());
  const std::string db = dir_.Sub("db");
  ConvertOptions o = Options("");
  o.restart_interval = 4;
  SourceListing upgraded;
  ASSERT_EQ(testing::RunCrashingAfterCommit(o, 3,
                                            [&](const ConvertOptions& with_crash) {
                                              return UpgradeInPlace(db, with_crash, &upgraded).ok();
                                            }),
            testing::kInjectedCrash);
  EXPECT_EQ(SegmentedRecords(db), 0) << "the dataset was touched before the new one was complete";
  ASSERT_TRUE(fs::exists(UpgradingPath(db)));
  EXPECT_CODE(UpgradeInPlace(db, o, &upgraded), kAlreadyExists);  // not without --resume
  o.resume = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, UpgradeInPlace(db, o, &upgraded));
  EXPECT_EQ(s.resumed_from, 15u);  // 3 commits of 5
  EXPECT_FALSE(fs::exists(UpgradingPath(db)));
  EXPECT_FALSE(fs::exists(ReplacedPath(db)));
  EXPECT_EQ(SegmentedRecords(db), 36);
  ExpectSameSamples(dir_.Sub("reference"), db);
}

TEST_F(DatasetSourceTest, ASwapInterruptedBetweenItsRenamesIsFinishedByTheNextRun) {
  const std::string db = dir_.Sub("db");
  ASSERT_OK(Convert(listing_, Options(db)).status());
  ConvertOptions o = Options(UpgradingPath(db));
  o.restart_interval = 4;
  {
    ASSERT_OK_AND_ASSIGN(auto source, storage::DatasetReader::Open(db));
    ASSERT_OK_AND_ASSIGN(SourceListing listing, ListDataset(*source));
    DatasetSourceReader reader(source.get());
    o.reader = &reader;
    ASSERT_OK(Convert(listing, o).status());
  }
  fs::rename(db, ReplacedPath(db));  // the first rename happened, the second did not
  SourceListing upgraded;
  o.reader = nullptr;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, UpgradeInPlace(db, o, &upgraded));
  EXPECT_TRUE(s.already_complete);
  EXPECT_FALSE(fs::exists(ReplacedPath(db)));
  EXPECT_EQ(SegmentedRecords(db), 36);
}

// An incomplete .upgrading beside the original moved to .replaced (a hand move, or a crash of an
// older build) must never be swapped in: the original goes back, nothing is removed, and the
// upgrade can be resumed.
TEST_F(DatasetSourceTest, AnIncompleteUpgradeIsNeverSwappedInAndTheOriginalComesBack) {
  const std::string db = dir_.Sub("db");
  ASSERT_OK(Convert(listing_, Options(db)).status());
  ConvertOptions o = Options("");
  o.restart_interval = 4;
  SourceListing upgraded;
  ASSERT_EQ(testing::RunCrashingAfterCommit(o, 2,
                                            [&](const ConvertOptions& with_crash) {
                                              return UpgradeInPlace(db, with_crash, &upgraded).ok();
                                            }),
            testing::kInjectedCrash);
  ASSERT_TRUE(fs::exists(UpgradingPath(db)));
  fs::rename(db, ReplacedPath(db));
  auto refused = UpgradeInPlace(db, o, &upgraded);
  EXPECT_CODE(refused, kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("not a complete upgrade"), std::string::npos)
      << refused.status();
  EXPECT_FALSE(fs::exists(ReplacedPath(db)));
  ASSERT_TRUE(fs::exists(db));
  EXPECT_TRUE(fs::exists(UpgradingPath(db)));
  ExpectSameSamples(db, db);  // the original, complete and readable
  EXPECT_EQ(SegmentedRecords(db), 0);
  o.resume = true;
  ASSERT_OK(UpgradeInPlace(db, o, &upgraded).status());
  EXPECT_EQ(SegmentedRecords(db), 36);
}

TEST_F(DatasetSourceTest, ASingleFileUpgradeLeavesNoLockFileBehind) {
  const std::string db = dir_.Sub("single.lmdb");
  ConvertOptions first = Options(db);
  first.writer.single_file = true;
  ASSERT_OK(Convert(listing_, first).status());
  ConvertOptions o = Options("");
  o.restart_interval = 4;
  SourceListing upgraded;
  ASSERT_OK(UpgradeInPlace(db, o, &upgraded).status());
  EXPECT_EQ(SegmentedRecords(db), 36);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_.path()))
    names.push_back(e.path().filename().string());
  for (const std::string& n : names) {
    EXPECT_EQ(n.find(".upgrading"), std::string::npos) << n;
    EXPECT_EQ(n.find(".replaced"), std::string::npos) << n;
  }
}

// Two conversions writing one output at once: the second is refused at once, saying why, instead
// of failing later on a key the first wrote.
TEST_F(DatasetSourceTest, ASecondWriterOfADatasetIsRefusedSayingAnotherIsWriting) {
  const std::string db = dir_.Sub("db");
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto writer = storage::DatasetWriter::Create(db, testing::MakeHeader(), {});
    const char ok = writer.ok() ? 1 : 0;
    (void)!::write(ready[1], &ok, 1);
    char wait = 0;
    (void)!::read(done[0], &wait, 1);  // holds the writer until the parent has tried
    std::_Exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1);
  auto second = storage::DatasetWriter::Resume(db, testing::MakeHeader(), {});
  const char go = 1;
  (void)!::write(done[1], &go, 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_CODE(second, kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another process is writing"), std::string::npos)
      << second.status();
  // Once the first is gone, the dataset can be resumed.
  EXPECT_OK(storage::DatasetWriter::Resume(db, testing::MakeHeader(), {}).status());
}

TEST_F(DatasetSourceTest, AMissingDatasetIsNotFoundAndNothingIsCreated) {
  SourceListing upgraded;
  EXPECT_CODE(UpgradeInPlace(dir_.Sub("nothing"), Options(""), &upgraded), kNotFound);
  EXPECT_FALSE(fs::exists(UpgradingPath(dir_.Sub("nothing"))));
}

}  // namespace
}  // namespace ddpio::convert
