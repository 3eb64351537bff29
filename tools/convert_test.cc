#include "tools/convert.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gtest/gtest.h"
#include "ddpio/storage/dataset_reader.h"
#include "tests/support/crashing_conversion.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"
#include "tools/inspect.h"
#include "tools/synth.h"

namespace ddpio::tools {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class ConverterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = dir_.Sub("src");
    ASSERT_OK(RunSynth({src_, 3, 30, 32, 5, 90, 2, false}));
  }
  ConvertOptions Options(const std::string& out) {
    ConvertOptions o;
    o.out = out;
    o.threads = 2;
    o.progress = false;
    o.writer.batch_records = 10;  // several commits for 90 files
    return o;
  }
  std::string Digest(const std::string& path) {
    InspectOptions io;
    io.path = path;
    io.progress = false;
    auto report = Inspect(io);
    EXPECT_OK(report);
    return report.ok() ? report->content_digest : "";
  }
  testing::TempDir dir_;
  std::string src_;
};

TEST_F(ConverterTest, RecordsAreTheSourceFilesWithImageFolderLabels) {
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, Options(dir_.Sub("db"))));
  EXPECT_EQ(s.records, 90u);
  EXPECT_EQ(s.classes, 3u);
  ASSERT_OK_AND_ASSIGN(auto reader, storage::DatasetReader::Open(dir_.Sub("db")));
  EXPECT_EQ(reader->header().classes, listing.classes);
  ASSERT_OK_AND_ASSIGN(storage::ReadTxn txn, reader->BeginRead());
  for (uint64_t i = 0; i < 90; ++i) {
    ASSERT_OK_AND_ASSIGN(storage::RecordView v, txn.Get(i));
    EXPECT_EQ(v.label, listing.entries[i].label);
    EXPECT_EQ(v.source_name, listing.entries[i].relative);
    std::string file = Slurp(fs::path(src_) / listing.entries[i].relative);
    EXPECT_EQ(std::string(v.payload.begin(), v.payload.end()), file) << i;  // not re-encoded
    EXPECT_EQ(v.channels, 3);
    EXPECT_GT(v.width, 0u);
  }
}

TEST_F(ConverterTest, NonJpegStopsWithItsNameOrIsSkipped) {
  // A PNG (valid image, wrong format) in class 1: torchvision counts it, so it keeps its index.
  std::ofstream(fs::path(src_) / "class_001" / "img_00003b.png", std::ios::binary)
      << "\x89PNG\r\n\x1a\n0000";
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  ASSERT_EQ(listing.entries.size(), 91u);
  auto failed = Convert(listing, Options(dir_.Sub("strict")));
  EXPECT_CODE(failed, kDataLoss);
  EXPECT_NE(failed.status().message().find("img_00003b.png"), absl::string_view::npos) << failed.status();
  EXPECT_NE(failed.status().message().find("PNG"), absl::string_view::npos) << failed.status();
  EXPECT_CODE(storage::DatasetReader::Open(dir_.Sub("strict")), kFailedPrecondition);  // incomplete

  ConvertOptions o = Options(dir_.Sub("lenient"));
  o.skip_invalid = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
  EXPECT_EQ(s.records, 90u);
  ASSERT_EQ(s.skipped.size(), 1u);
  EXPECT_EQ(s.skipped[0].relative, "class_001/img_00003b.png");
  ASSERT_OK_AND_ASSIGN(auto reader, storage::DatasetReader::Open(dir_.Sub("lenient")));
  EXPECT_EQ(reader->completion().skipped, 1u);
}

TEST_F(ConverterTest, CorruptJpegDataIsCaughtByTheFullDecode) {
  fs::path victim = fs::path(src_) / "class_002" / "img_00007.jpg";
  std::string bytes = Slurp(victim);
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  auto failed = Convert(listing, Options(dir_.Sub("strict")));
  EXPECT_CODE(failed, kDataLoss);
  EXPECT_NE(failed.status().message().find("class_002/img_00007.jpg"), absl::string_view::npos)
      << failed.status();
  ConvertOptions o = Options(dir_.Sub("lenient"));
  o.skip_invalid = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
  EXPECT_EQ(s.skipped.size(), 1u);
  EXPECT_EQ(s.records, 89u);
}

TEST_F(ConverterTest, ResumeAfterFixingABadFileEqualsACleanRun) {
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  ASSERT_OK(Convert(listing, Options(dir_.Sub("clean"))));
  fs::path victim = fs::path(src_) / "class_001" / "img_00020.jpg";
  std::string good = Slurp(victim);
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << "garbage";
  EXPECT_CODE(Convert(listing, Options(dir_.Sub("resumed"))), kDataLoss);
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << good;
  ConvertOptions o = Options(dir_.Sub("resumed"));
  o.resume = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
  EXPECT_EQ(s.resumed_from, 50u);  // class_001/img_00020 is entry 30 + 20
  EXPECT_EQ(Digest(dir_.Sub("resumed")), Digest(dir_.Sub("clean")));
}

TEST_F(ConverterTest, ResumeAfterACrashGivesAnIdenticalDataset) {
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  ASSERT_OK(Convert(listing, Options(dir_.Sub("clean"))));
  // A real crash: the child process dies with _exit right after its third commit.
  ASSERT_EQ(testing::ConvertCrashingAfterCommit(listing, Options(dir_.Sub("crashed")), 3), testing::kInjectedCrash)
      << "the injected crash did not happen";
  EXPECT_CODE(storage::DatasetReader::Open(dir_.Sub("crashed")), kFailedPrecondition);
  ConvertOptions o = Options(dir_.Sub("crashed"));
  o.resume = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
  EXPECT_EQ(s.resumed_from, 30u);  // 3 commits of 10 records
  EXPECT_EQ(s.records, 90u);
  EXPECT_EQ(Digest(dir_.Sub("crashed")), Digest(dir_.Sub("clean")));
  o.resume = true;
  ASSERT_OK_AND_ASSIGN(ConvertSummary again, Convert(listing, o));
  EXPECT_TRUE(again.already_complete);
}

TEST_F(ConverterTest, ResumeRefusesAnotherSource) {
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  fs::path victim = fs::path(src_) / "class_002" / "img_00001.jpg";
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << "garbage";
  EXPECT_CODE(Convert(listing, Options(dir_.Sub("db"))), kDataLoss);
  SourceListing other = listing;
  other.entries.pop_back();
  ConvertOptions o = Options(dir_.Sub("db"));
  o.resume = true;
  EXPECT_CODE(Convert(other, o), kFailedPrecondition);
  o.skip_invalid = true;  // other options are another conversion too
  EXPECT_CODE(Convert(listing, o), kFailedPrecondition);
}

TEST_F(ConverterTest, RefusesToOverwriteWithoutResume) {
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  ASSERT_OK(Convert(listing, Options(dir_.Sub("db"))));
  EXPECT_CODE(Convert(listing, Options(dir_.Sub("db"))), kAlreadyExists);
}

TEST_F(ConverterTest, InspectVerifyFindsEveryCorruptedRecord) {
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  ASSERT_OK(Convert(listing, Options(dir_.Sub("db"))));
  InspectOptions io;
  io.path = dir_.Sub("db");
  io.verify = true;
  io.decode = true;
  io.progress = false;
  ASSERT_OK_AND_ASSIGN(InspectReport clean, Inspect(io));
  EXPECT_TRUE(clean.bad.empty());
  EXPECT_EQ(clean.class_counts, (std::vector<uint64_t>{30, 30, 30}));
}

}  // namespace
}  // namespace ddpio::tools
