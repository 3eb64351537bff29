#include "ddpio/convert/convert.h"

#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ddpio/common/status_macros.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_region.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/loader/resize.h"
#include "ddpio/loader/sample_processor.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/shards.h"
#include "gtest/gtest.h"
#include "tests/support/crashing_conversion.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"
#include "tools/inspect.h"
#include "tools/synth.h"

namespace ddpio::convert {
namespace {

using tools::Inspect;
using tools::InspectOptions;
using tools::InspectReport;
using tools::RunSynth;
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
  ConvertOptions o = Options(dir_.Sub("db"));
  o.restart_interval = 0;  // JPEGs keep their bytes
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
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
  EXPECT_NE(failed.status().message().find("img_00003b.png"), absl::string_view::npos)
      << failed.status();
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
  ASSERT_EQ(testing::ConvertCrashingAfterCommit(listing, Options(dir_.Sub("crashed")), 3),
            testing::kInjectedCrash)
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

// --max-side 32 over images of 25-40 px: the larger ones are stored with a longer side of
// exactly 32, re-encoded, their original size recorded, their pixels the loader's resampling of
// the original; the ones that fit keep their bytes.
TEST_F(ConverterTest, MaxSideShrinksOnlyLargerImagesAndRecordsTheirSize) {
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  ConvertOptions o = Options(dir_.Sub("small"));
  o.shrink.max_side = 32;
  o.restart_interval = 0;  // images kept are compared byte for byte
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
  ASSERT_EQ(s.records, 90u);
  ASSERT_OK_AND_ASSIGN(auto reader, storage::DatasetReader::Open(dir_.Sub("small")));
  EXPECT_EQ(reader->header().format_version, 3);
  ASSERT_OK_AND_ASSIGN(auto txn, reader->BeginRead());
  ASSERT_OK_AND_ASSIGN(loader::JpegDecoder jpeg, loader::JpegDecoder::Create());
  loader::SampleProcessor decoder;
  loader::Resampler resampler;
  int shrunk = 0, kept = 0;
  for (uint64_t i = 0; i < reader->size(); ++i) {
    ASSERT_OK_AND_ASSIGN(storage::RecordView r, txn.Get(i));
    const std::string original = Slurp(fs::path(src_) / listing.entries[i].relative);
    const absl::Span<const uint8_t> original_bytes(
        reinterpret_cast<const uint8_t*>(original.data()), original.size());
    ASSERT_OK_AND_ASSIGN(loader::JpegInfo info, jpeg.ReadInfo(original_bytes));
    EXPECT_LE(std::max(r.width, r.height), 32u) << i;
    if (std::max(info.width, info.height) <= 32) {
      ++kept;
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.payload.data()), r.payload.size()),
                original)
          << i;
      EXPECT_EQ(r.original_width, 0u);
      continue;
    }
    ++shrunk;
    EXPECT_EQ(r.original_width, static_cast<uint32_t>(info.width)) << i;
    EXPECT_EQ(r.original_height, static_cast<uint32_t>(info.height)) << i;
    EXPECT_EQ(std::max(r.width, r.height), 32u) << i;
    // The stored pixels are the original resampled (plus one JPEG re-encode at quality 90).
    storage::Record source = storage::Record::FromView(r);
    source.payload.assign(original_bytes.begin(), original_bytes.end());
    source.width = static_cast<uint32_t>(info.width);
    source.height = static_cast<uint32_t>(info.height);
    std::vector<uint8_t> full, want(static_cast<size_t>(r.width) * r.height * 3), got;
    ASSERT_OK(decoder.DecodeWhole(source.view(), &full));
    resampler.Resize(
        full.data(), info.width, info.height, info.width * 3, 3,
        loader::Box{0, 0, static_cast<double>(info.width), static_cast<double>(info.height)},
        want.data(), static_cast<int>(r.width), static_cast<int>(r.height),
        static_cast<int>(r.width) * 3);
    ASSERT_OK(decoder.DecodeWhole(r, &got));
    double diff = 0;
    for (size_t k = 0; k < want.size(); ++k) diff += std::abs(int{want[k]} - int{got[k]});
    EXPECT_LT(diff / want.size(), 6.0)
        << i;  // JPEG q90 of noisy 32 px images; a wrong resize is ~40
  }
  EXPECT_GT(shrunk, 10);
  EXPECT_GT(kept, 10);
  // A resume with another --max-side is another conversion.
  o.resume = true;
  o.shrink.max_side = 30;
  o.out = dir_.Sub("small");
  EXPECT_CODE(Convert(listing, o), kFailedPrecondition);
}

// Two shards written in parallel read as the unsharded dataset: same size, same records in the
// same order, same content digest; a crash in one shard resumes to the same result.
TEST_F(ConverterTest, TwoShardsReadIdenticallyToOneDataset) {
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src_));
  ASSERT_OK(Convert(listing, Options(dir_.Sub("one"))).status());
  ConvertOptions o = Options(dir_.Sub("two"));
  o.shards = 2;
  ASSERT_OK_AND_ASSIGN(ConvertSummary s, Convert(listing, o));
  EXPECT_EQ(s.records, 90u);
  {  // closed before Inspect opens them with its own reader options
    ASSERT_OK_AND_ASSIGN(auto one, storage::DatasetReader::Open(dir_.Sub("one")));
    ASSERT_OK_AND_ASSIGN(auto two, storage::DatasetReader::Open(dir_.Sub("two")));
    EXPECT_EQ(two->shard_count(), 2u);
    ASSERT_EQ(two->size(), one->size());
    ASSERT_OK_AND_ASSIGN(auto a, one->BeginRead());
    ASSERT_OK_AND_ASSIGN(auto b, two->BeginRead());
    for (uint64_t i = 0; i < one->size(); ++i) {
      ASSERT_OK_AND_ASSIGN(storage::RecordView x, a.Get(i));
      ASSERT_OK_AND_ASSIGN(storage::RecordView y, b.Get(i));
      EXPECT_EQ(x.source_name, y.source_name) << i;
      EXPECT_EQ(x.label, y.label) << i;
      EXPECT_TRUE(
          std::equal(x.payload.begin(), x.payload.end(), y.payload.begin(), y.payload.end()))
          << i;
    }
    EXPECT_EQ(two->header().classes, one->header().classes);
  }
  EXPECT_EQ(Digest(dir_.Sub("one")), Digest(dir_.Sub("two")));

  // Interrupted: no manifest yet, so not readable; --resume finishes it to the same dataset.
  std::filesystem::remove(dir_.Sub("two") + "/" + storage::kShardManifest);
  EXPECT_CODE(storage::DatasetReader::Open(dir_.Sub("two")), kFailedPrecondition);
  const absl::Status refused = Convert(listing, o).status();  // not resuming: refuses to touch it
  EXPECT_CODE(refused, kAlreadyExists);
  // The library names the setting, never a flag: the program and Python each say it their way.
  EXPECT_EQ(std::string(refused.message()).find("--"), std::string::npos) << refused;
  EXPECT_EQ(SettingsOf(refused), std::vector<std::string>{"resume"});
  o.resume = true;
  ASSERT_OK(Convert(listing, o).status());
  EXPECT_EQ(Digest(dir_.Sub("one")), Digest(dir_.Sub("two")));
}

// --restart-interval: every JPEG is stored with restart markers tiling its rows, decodes to
// exactly the original's pixels, and the loader's exact mode gives the same samples from it —
// decoding only the crop's segments — as from the plain dataset.
TEST_F(ConverterTest, RestartMarkersAreLosslessAndTheLoaderReadsOnlyTheCrop) {
  ASSERT_OK(RunSynth({dir_.Sub("big"), 2, 6, 200, 9, 90, 2, false}));
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(dir_.Sub("big")));
  ASSERT_OK(Convert(listing, Options(dir_.Sub("plain"))).status());
  ConvertOptions o = Options(dir_.Sub("segmented"));
  o.restart_interval = 4;
  ASSERT_OK(Convert(listing, o).status());
  ASSERT_OK_AND_ASSIGN(auto plain, storage::DatasetReader::Open(dir_.Sub("plain")));
  ASSERT_OK_AND_ASSIGN(auto segmented, storage::DatasetReader::Open(dir_.Sub("segmented")));
  ASSERT_OK_AND_ASSIGN(auto a, plain->BeginRead());
  ASSERT_OK_AND_ASSIGN(auto b, segmented->BeginRead());
  ASSERT_OK_AND_ASSIGN(loader::JpegDecoder jpeg, loader::JpegDecoder::Create());
  loader::SampleProcessor from_plain, from_segments;
  loader::AugmentOptions aug;
  aug.size = 64;
  int used = 0;
  for (uint64_t i = 0; i < plain->size(); ++i) {
    ASSERT_OK_AND_ASSIGN(storage::RecordView x, a.Get(i));
    ASSERT_OK_AND_ASSIGN(storage::RecordView y, b.Get(i));
    ASSERT_OK(loader::ReadRestartLayout(y.payload).status()) << i;
    ASSERT_OK(loader::RestartLayoutFromOffsets(y.payload, y.segment_offsets).status())
        << i;  // recorded
    std::vector<uint8_t> px, py;
    ASSERT_OK_AND_ASSIGN(loader::JpegInfo ix, jpeg.ReadInfo(x.payload));
    ASSERT_OK(jpeg.Decode(x.payload, ix, &px));
    ASSERT_OK_AND_ASSIGN(loader::JpegInfo iy, jpeg.ReadInfo(y.payload));
    ASSERT_OK(jpeg.Decode(y.payload, iy, &py));
    ASSERT_EQ(px, py) << i;  // lossless
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<uint8_t> want(64 * 64 * 3), got(64 * 64 * 3);
      ASSERT_OK(from_plain.Process(x, i, epoch, 3, aug, loader::DecodeMode::kExact, want.data()));
      ASSERT_OK(from_segments.Process(y, i, epoch, 3, aug, loader::DecodeMode::kExact, got.data()));
      ASSERT_EQ(got, want) << i << " epoch " << epoch;
      used += from_segments.last_used_segments();
    }
  }
  EXPECT_GT(used, 0);
}

// Whether the loader's decoder (ddpio's Huffman decoder over the JPEG's own segments) decodes it.
bool LoaderDecodes(const std::vector<uint8_t>& jpeg) {
  auto layout = loader::ReadRestartLayout(jpeg);
  if (!layout.ok()) return false;
  loader::RegionDecoder d;
  const loader::ScanSegments segments{layout->offsets, layout->interval};
  loader::DecodedRegion region;
  std::vector<uint8_t> px;
  const loader::Box all{0, 0, static_cast<double>(layout->width),
                        static_cast<double>(layout->height)};
  absl::Status st = d.Decode(jpeg, all, layout->width, layout->height, false, true, false, &px,
                             &region, nullptr, &segments);
  EXPECT_TRUE(d.last_used_own_huffman());
  return st.ok();
}

TEST_F(ConverterTest, OwnRestartMarkersTheLoaderRefusesAreTranscodedInstead) {
  // A JPEG with restart markers of its own and one stray byte before one of them, which libjpeg
  // lets by (its read-ahead has met the marker) and the loader's decoder refuses.
  ASSERT_OK_AND_ASSIGN(
      std::vector<uint8_t> clean,
      loader::AddRestartMarkers(testing::MakeDetailedJpeg(96, 64, 1, TJSAMP_420), 1));
  ASSERT_OK_AND_ASSIGN(loader::RestartLayout l, loader::ReadRestartLayout(clean));
  ASSERT_OK_AND_ASSIGN(loader::JpegDecoder jpeg, loader::JpegDecoder::Create());
  std::vector<uint8_t> stray, original_pixels;
  for (size_t i = 1; i + 1 < l.offsets.size() && stray.empty(); ++i) {
    std::vector<uint8_t> bad = clean;
    bad.insert(bad.begin() + l.offsets[i] - 2, 0x00);
    auto info = jpeg.ReadInfo(bad);
    if (info.ok() && jpeg.Decode(bad, *info, &original_pixels).ok() && !LoaderDecodes(bad)) {
      stray = bad;
    }
  }
  ASSERT_FALSE(stray.empty()) << "no segment whose stray byte libjpeg lets by";
  ASSERT_TRUE(LoaderDecodes(clean));
  const fs::path src = dir_.Sub("own");
  fs::create_directories(src / "a");
  std::ofstream(src / "a" / "clean.jpg", std::ios::binary)
      .write(reinterpret_cast<const char*>(clean.data()),
             static_cast<std::streamsize>(clean.size()));
  std::ofstream(src / "a" / "stray.jpg", std::ios::binary)
      .write(reinterpret_cast<const char*>(stray.data()),
             static_cast<std::streamsize>(stray.size()));
  ASSERT_OK_AND_ASSIGN(SourceListing listing, ListImageFolder(src.string()));
  ConvertOptions o = Options(dir_.Sub("own.lmdb"));
  o.restart_interval = 4;
  ASSERT_OK(Convert(listing, o).status());
  ASSERT_OK_AND_ASSIGN(auto reader, storage::DatasetReader::Open(dir_.Sub("own.lmdb")));
  ASSERT_OK_AND_ASSIGN(auto txn, reader->BeginRead());
  ASSERT_EQ(reader->size(), 2u);
  loader::SampleProcessor processor;
  for (uint64_t i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(storage::RecordView r, txn.Get(i));
    const std::vector<uint8_t> bytes(r.payload.begin(), r.payload.end());
    if (r.source_name.find("clean") != std::string::npos) {
      EXPECT_EQ(bytes, clean);  // suitable markers the loader takes: the bytes kept
    } else {
      EXPECT_NE(bytes, stray);  // transcoded: clean markers, the same pixels
      std::vector<uint8_t> px;
      ASSERT_OK(processor.DecodeWhole(r, &px));
      EXPECT_TRUE(processor.last_used_own_huffman());
      EXPECT_EQ(px, original_pixels);
    }
  }
}

}  // namespace
}  // namespace ddpio::convert
