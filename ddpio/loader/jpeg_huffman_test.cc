#include "ddpio/loader/jpeg_huffman.h"

#include <turbojpeg.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ddpio/loader/jpeg_region.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/loader/sample_processor.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/status_matchers.h"

namespace ddpio::loader {
namespace {

using ::ddpio::testing::JpegRecord;
using ::ddpio::testing::MakeCmykJpeg;
using ::ddpio::testing::MakeDetailedJpeg;

struct Decoded {
  absl::Status status;
  std::vector<uint8_t> pixels;
  bool own = false;  // went through ddpio's decoder
  int streams = 0;   // segments it had in decoding at once
};

// Decodes `jpeg` (laid out as `l`) through RegionDecoder with ddpio's Huffman decoder or
// libjpeg's: the box `box`, to out x out (0: the whole image at full size, read to the end).
Decoded DecodeWith(bool own, const std::vector<uint8_t>& jpeg, const RestartLayout& l,
                   const Box& box, int out, bool fast_idct, int streams = 2) {
  RegionDecoder d;
  d.set_own_huffman(own);
  d.set_huffman_streams(streams);
  const ScanSegments segments{l.offsets, l.interval};
  DecodedRegion region;
  Decoded r;
  r.status = d.Decode(jpeg, box, out == 0 ? l.width : out, out == 0 ? l.height : out,
                      /*allow_scaling=*/out != 0, /*full=*/out == 0, fast_idct, &r.pixels, &region,
                      nullptr, &segments);
  r.pixels.resize(static_cast<size_t>(region.width) * region.height * 3);
  r.own = d.last_used_own_huffman();
  r.streams = d.last_huffman_streams();
  return r;
}

// The photo as converted: restart markers every RestartIntervalFor(mcus, interval) MCUs.
RestartLayout Layout(const std::vector<uint8_t>& jpeg) {
  auto l = ReadRestartLayout(jpeg);
  EXPECT_OK(l.status());
  return l.ok() ? *l : RestartLayout{};
}

std::vector<uint8_t> Segmented(const std::vector<uint8_t>& jpeg, int interval) {
  auto r = AddRestartMarkers(jpeg, interval);
  EXPECT_OK(r.status());
  return r.ok() ? *r : std::vector<uint8_t>{};
}

TEST(HuffmanScan, GivesLibjpegsPixelsForEverySubsamplingIntervalAndScale) {
  struct Source {
    std::string name;
    std::vector<uint8_t> jpeg;
  };
  std::vector<Source> sources;
  for (const auto& [name, sub] :
       {std::pair{"444", TJSAMP_444}, std::pair{"422", TJSAMP_422}, std::pair{"420", TJSAMP_420},
        std::pair{"440", TJSAMP_440}, std::pair{"gray", TJSAMP_GRAY}}) {
    sources.push_back({name, MakeDetailedJpeg(203, 117, 3, sub)});
    sources.push_back({std::string(name) + " small", MakeDetailedJpeg(17, 9, 4, sub)});
  }
  sources.push_back({"cmyk", MakeCmykJpeg(77, 45)});
  int compared = 0;
  for (const Source& s : sources) {
    for (int interval : {1, 2, 3, 4, 64}) {
      const std::vector<uint8_t> jpeg = Segmented(s.jpeg, interval);
      const RestartLayout l = Layout(jpeg);
      const Box all{0, 0, static_cast<double>(l.width), static_cast<double>(l.height)};
      const Box middle{l.width * 0.25, l.height * 0.3, l.width * 0.8, l.height * 0.9};
      // Whole at full size; a crop scaled by 1/2 .. 1/8 (skipped and cropped scanlines too).
      for (const auto& [box, out, fast] :
           {std::tuple{all, 0, false}, std::tuple{middle, 0, true}, std::tuple{middle, 40, true},
            std::tuple{middle, 12, false}, std::tuple{all, 5, true},
            std::tuple{middle, 3, false}}) {
        SCOPED_TRACE(s.name + ", interval " + std::to_string(l.interval) + ", out " +
                     std::to_string(out));
        const Decoded own = DecodeWith(true, jpeg, l, box, out, fast);
        const Decoded lib = DecodeWith(false, jpeg, l, box, out, fast);
        ASSERT_OK(own.status);
        ASSERT_OK(lib.status);
        EXPECT_TRUE(own.own);
        EXPECT_FALSE(lib.own);
        ASSERT_FALSE(own.pixels.empty());
        EXPECT_TRUE(own.pixels == lib.pixels);
        EXPECT_EQ(own.streams, l.offsets.size() > 2 ? 2 : 1);
        // One segment at a time: really one, and the same pixels.
        const Decoded one = DecodeWith(true, jpeg, l, box, out, fast, /*streams=*/1);
        ASSERT_OK(one.status);
        EXPECT_EQ(one.streams, 1);
        EXPECT_TRUE(one.pixels == lib.pixels);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 11 * 5 * 6);
}

TEST(HuffmanScan, SubJpegBandsCarryTheirOffsetsAndGiveLibjpegsPixels) {
  const std::vector<uint8_t> jpeg = Segmented(MakeDetailedJpeg(300, 190, 9, TJSAMP_420), 4);
  const RestartLayout l = Layout(jpeg);
  ASSERT_GT(l.segments_per_row, 3);
  std::vector<uint8_t> sub;
  std::vector<uint32_t> offsets;
  for (const auto& [r0, r1, c0, c1] :
       {std::tuple{0, l.mcu_rows, 0, l.segments_per_row}, std::tuple{1, 4, 1, 3},
        std::tuple{l.mcu_rows - 2, l.mcu_rows, l.segments_per_row - 1, l.segments_per_row},
        std::tuple{3, 4, 2, 3}}) {
    ASSERT_OK(BuildSubJpeg(jpeg, l, r0, r1, c0, c1, &sub, &offsets));
    const RestartLayout sl = Layout(sub);
    EXPECT_EQ(offsets, sl.offsets);  // what BuildSubJpeg says is where the segments are
    const Box all{0, 0, static_cast<double>(sl.width), static_cast<double>(sl.height)};
    const Decoded own = DecodeWith(true, sub, sl, all, 0, false);
    const Decoded lib = DecodeWith(false, sub, sl, all, 0, false);
    ASSERT_OK(own.status);
    ASSERT_OK(lib.status);
    EXPECT_TRUE(own.own);
    EXPECT_TRUE(own.pixels == lib.pixels);
  }
}

// The segment index i's byte range in `jpeg`: [offsets[i], end of its data).
std::pair<size_t, size_t> SegmentBytes(const RestartLayout& l, size_t i) {
  const bool last = i + 2 == l.offsets.size();
  return {l.offsets[i], last ? l.offsets[i + 1] : l.offsets[i + 1] - 2};
}

TEST(HuffmanScan, DamagedSegmentsFailAsLibjpegFails) {
  const std::vector<uint8_t> jpeg = Segmented(MakeDetailedJpeg(160, 96, 5, TJSAMP_420), 2);
  const RestartLayout l = Layout(jpeg);
  ASSERT_GT(l.offsets.size(), 8u);
  const auto decode_both = [](const std::vector<uint8_t>& bytes) {
    absl::StatusOr<RestartLayout> bl = ReadRestartLayout(bytes);
    EXPECT_OK(bl.status());
    const Box all{0, 0, static_cast<double>(bl->width), static_cast<double>(bl->height)};
    return std::pair{DecodeWith(true, bytes, *bl, all, 0, false),
                     DecodeWith(false, bytes, *bl, all, 0, false)};
  };
  // Bytes left over before a restart marker (libjpeg: "extraneous bytes before marker 0xd3").
  {
    std::vector<uint8_t> bad = jpeg;
    const size_t end = SegmentBytes(l, 3).second;
    bad.insert(bad.begin() + static_cast<std::ptrdiff_t>(end), {0x12, 0x34});
    const auto [own, lib] = decode_both(bad);
    EXPECT_TRUE(own.own);
    EXPECT_EQ(own.status.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(lib.status.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(own.status.message().find("extraneous bytes before marker 0xd3"), std::string::npos)
        << own.status;
  }
  // A segment cut short: its MCUs need bits it does not have.
  {
    std::vector<uint8_t> bad = jpeg;
    const auto [begin, end] = SegmentBytes(l, 4);
    bad.erase(bad.begin() + static_cast<std::ptrdiff_t>(begin + (end - begin) / 3),
              bad.begin() + static_cast<std::ptrdiff_t>(end));
    const auto [own, lib] = decode_both(bad);
    EXPECT_EQ(own.status.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(lib.status.code(), absl::StatusCode::kDataLoss);
  }
  // Ones where a code should be: no valid Huffman code.
  {
    std::vector<uint8_t> bad = jpeg;
    const auto [begin, end] = SegmentBytes(l, 5);
    ASSERT_GT(end - begin, 6u);
    for (size_t i = begin; i < begin + 4; i += 2) bad[i] = 0xFF, bad[i + 1] = 0x00;  // stuffed
    const auto [own, lib] = decode_both(bad);
    EXPECT_EQ(own.status.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(lib.status.code(), absl::StatusCode::kDataLoss);
  }
  // Every byte of the scan changed in turn: both decoders agree on pixels or both refuse — except
  // for whole bytes left over at a segment's end (a damaged MCU can end early), which libjpeg
  // refuses only when its bit buffer had not yet read up to the next marker, and ddpio's decoder
  // refuses always before a restart marker and never before EOI (no pixel's data).
  int refused = 0, decoded = 0, leftover = 0;
  for (size_t at = l.offsets.front(); at + 2 < l.offsets.back(); at += 7) {
    std::vector<uint8_t> bad = jpeg;
    bad[at] = static_cast<uint8_t>(bad[at] ^ (0x5A + at % 3));
    if (!ReadRestartLayout(bad).ok()) continue;  // a marker made or broken: not decodable
    const auto [own, lib] = decode_both(bad);
    SCOPED_TRACE("byte " + std::to_string(at));
    if (own.status.ok() != lib.status.ok()) {
      const absl::Status& refusal = own.status.ok() ? lib.status : own.status;
      EXPECT_NE(refusal.message().find("extraneous bytes before marker"), std::string::npos)
          << refusal;
      // libjpeg's refusal at the end of the scan (EOI), or ddpio's before a restart marker.
      EXPECT_EQ(refusal.message().find("marker 0xd9") != std::string::npos, own.status.ok());
      ++leftover;
      continue;
    }
    ASSERT_EQ(own.status.ok(), lib.status.ok()) << own.status << " / " << lib.status;
    if (own.status.ok()) {
      EXPECT_TRUE(own.pixels == lib.pixels);
      ++decoded;
    } else {
      ++refused;
    }
  }
  EXPECT_GT(refused, 10);
  EXPECT_GT(decoded, 10);
  EXPECT_LT(leftover, refused);
}

// The 13 camera photographs of Debian's mate-backgrounds (1280 x 1024 to 2560 x 1920; installed by
// scripts/install-deps.sh, and what scripts/real-photos.py cuts the benchmarks' photo sets from),
// with restart markers every 4 MCUs as `convert` writes them (and every MCU for some): ddpio's
// decoder gives libjpeg's pixels whole, DCT-scaled and cropped, and the loader's samples in both
// modes.
TEST(HuffmanScan, RealPhotosGiveLibjpegsPixels) {
  const std::filesystem::path dir = "/usr/share/backgrounds/mate/nature";
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir)) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".jpg") files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 10u) << "no camera photos in " << dir
                               << ": scripts/install-deps.sh installs mate-backgrounds";
  int compared = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    std::ifstream in(files[f], std::ios::binary);
    const std::vector<uint8_t> original{std::istreambuf_iterator<char>(in), {}};
    for (int interval : f < 3 ? std::vector<int>{4, 1} : std::vector<int>{4}) {
      SCOPED_TRACE(files[f].string() + ", interval " + std::to_string(interval));
      const std::vector<uint8_t> jpeg = Segmented(original, interval);
      const RestartLayout l = Layout(jpeg);
      const Box all{0, 0, static_cast<double>(l.width), static_cast<double>(l.height)};
      const Box crop{l.width * 0.3, l.height * 0.2, l.width * 0.7, l.height * 0.65};
      for (const auto& [box, out] : {std::pair{all, 0}, std::pair{crop, 224}}) {
        const Decoded own = DecodeWith(true, jpeg, l, box, out, out != 0);
        const Decoded lib = DecodeWith(false, jpeg, l, box, out, out != 0);
        ASSERT_OK(own.status);
        ASSERT_OK(lib.status);
        ASSERT_TRUE(own.own);
        EXPECT_TRUE(own.pixels == lib.pixels);
        ++compared;
      }
      storage::Record rec = JpegRecord(jpeg, l.width, l.height, 3, 0);
      rec.segment_offsets = EncodeSegmentOffsets(l);
      SampleProcessor own, lib;
      lib.set_own_huffman(false);
      AugmentOptions aug;
      std::vector<uint8_t> a(224 * 224 * 3), b(224 * 224 * 3);
      for (DecodeMode mode : {DecodeMode::kFast, DecodeMode::kExact}) {
        for (uint64_t i = 0; i < 3; ++i) {
          ASSERT_OK(own.Process(rec.view(), i, 0, 5, aug, mode, a.data()));
          ASSERT_OK(lib.Process(rec.view(), i, 0, 5, aug, mode, b.data()));
          EXPECT_TRUE(own.last_used_own_huffman());
          EXPECT_TRUE(a == b) << DecodeModeName(mode) << " sample " << i;
          ++compared;
        }
      }
    }
  }
  EXPECT_GE(compared, 10 * 8);
}

TEST(HuffmanScan, LeavesScansItDoesNotDecodeToLibjpeg) {
  const std::vector<uint8_t> jpeg = Segmented(MakeDetailedJpeg(64, 48, 2, TJSAMP_420), 2);
  RestartLayout l = Layout(jpeg);
  const Box all{0, 0, 64, 48};
  const Decoded lib = DecodeWith(false, jpeg, l, all, 0, false);
  ASSERT_OK(lib.status);
  RestartLayout wrong_interval = l;
  wrong_interval.interval = 1;
  RestartLayout missing_segment = l;
  missing_segment.offsets.pop_back();
  RestartLayout past_the_end = l;
  past_the_end.offsets.back() = static_cast<uint32_t>(jpeg.size());
  RestartLayout wrapping = l;  // 0xFFFFFFFF + 2 wraps to 1 in 32 bits
  wrapping.offsets[0] = 0x80000000u;
  wrapping.offsets[1] = 0xFFFFFFFFu;
  for (const RestartLayout& bad : {wrong_interval, missing_segment, past_the_end, wrapping}) {
    const Decoded d = DecodeWith(true, jpeg, bad, all, 0, false);
    ASSERT_OK(d.status);
    EXPECT_FALSE(d.own);
    EXPECT_TRUE(d.pixels == lib.pixels);
  }
}

// A segment of 384 blocks (64 MCUs of 4:2:0) cut to a tenth, the last of its batch: its stream
// decodes on into the zeros after the batch, until a block's start finds it past what the padding
// allows (the bound that keeps its reads inside the buffer: AddressSanitizer in CI) or the
// segment's end finds its data ran out.
TEST(HuffmanScan, ALongSegmentCutShortIsRefusedWithoutReadingPastThePadding) {
  const std::vector<uint8_t> jpeg = Segmented(MakeDetailedJpeg(1024, 32, 9, TJSAMP_420), 64);
  const RestartLayout l = Layout(jpeg);
  ASSERT_EQ(l.offsets.size(), 3u);  // 2 rows of 64 MCUs, a segment each
  for (size_t segment : {size_t{0}, size_t{1}}) {
    std::vector<uint8_t> bad = jpeg;
    const auto [begin, end] = SegmentBytes(l, segment);
    bad.erase(bad.begin() + static_cast<std::ptrdiff_t>(begin + (end - begin) / 10),
              bad.begin() + static_cast<std::ptrdiff_t>(end));
    absl::StatusOr<RestartLayout> bl = ReadRestartLayout(bad);
    ASSERT_OK(bl.status());
    const Box all{0, 0, 1024, 32};
    const Decoded own = DecodeWith(true, bad, *bl, all, 0, false);
    const Decoded lib = DecodeWith(false, bad, *bl, all, 0, false);
    EXPECT_TRUE(own.own);
    EXPECT_EQ(own.status.code(), absl::StatusCode::kDataLoss) << segment << ": " << own.status;
    EXPECT_EQ(lib.status.code(), absl::StatusCode::kDataLoss) << segment << ": " << lib.status;
  }
}

// libjpeg's own error manager, which only counts warnings: after damage the decode goes on to the
// last row, the MCUs from the damaged batch on are zeros (mid-grey), and the rows above are the
// image's.
TEST(HuffmanScan, AWarningOnlyHandlerGetsTheWholeImageWithZerosAfterTheDamage) {
  constexpr int kW = 160, kH = 128;  // 10 x 8 MCUs of 4:2:0, 5 segments of 2 a row
  const std::vector<uint8_t> jpeg = Segmented(MakeDetailedJpeg(kW, kH, 5, TJSAMP_420), 2);
  const RestartLayout l = Layout(jpeg);
  ASSERT_EQ(l.offsets.size(), 41u);
  std::vector<uint8_t> bad = jpeg;
  const auto [begin, end] = SegmentBytes(l, 37);  // MCU row 7, in the third batch
  ASSERT_GT(end - begin, 6u);
  for (size_t i = begin; i < begin + 4; i += 2) bad[i] = 0xFF, bad[i + 1] = 0x00;
  const auto decode = [&](const std::vector<uint8_t>& bytes, long* warnings) {
    jpeg_decompress_struct cinfo;
    jpeg_error_mgr err;
    cinfo.err = jpeg_std_error(&err);
    err.output_message = [](j_common_ptr) {};
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, bytes.data(), bytes.size());
    jpeg_read_header(&cinfo, TRUE);
    jpeg_start_decompress(&cinfo);
    HuffmanScan scan;
    EXPECT_TRUE(scan.Install(&cinfo, bytes, l.offsets, l.interval));
    std::vector<uint8_t> pixels(kW * kH * 3);
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = pixels.data() + static_cast<size_t>(cinfo.output_scanline) * kW * 3;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    *warnings = err.num_warnings;
    jpeg_destroy_decompress(&cinfo);
    return pixels;
  };
  long warnings = 0;
  const std::vector<uint8_t> good = decode(jpeg, &warnings);
  EXPECT_EQ(warnings, 0);
  const std::vector<uint8_t> damaged = decode(bad, &warnings);
  EXPECT_GE(warnings, 1);
  // Segments of 2 MCUs, 5 a row; batches of 16: the third starts at segment 32, the 5th MCU of
  // MCU row 6, the damage is in MCU row 7. Fancy upsampling blends 8 rows either side.
  const size_t row = kW * 3;
  EXPECT_TRUE(std::equal(damaged.begin(), damaged.begin() + 88 * row, good.begin()));
  EXPECT_TRUE(
      std::all_of(damaged.begin() + 120 * row, damaged.end(), [](uint8_t v) { return v == 128; }));
  EXPECT_FALSE(std::equal(damaged.begin() + 120 * row, damaged.end(), good.begin() + 120 * row));
  // MCU row 6: its first 4 MCUs (64 pixels) from the second batch, the rest from the third.
  for (int y = 98; y < 110; ++y) {
    const auto* d = damaged.data() + y * row;
    EXPECT_TRUE(std::equal(d, d + 56 * 3, good.data() + y * row)) << y;
    EXPECT_TRUE(std::all_of(d + 72 * 3, d + row, [](uint8_t v) { return v == 128; })) << y;
  }
}

TEST(HuffmanScan, TheLoadersSamplesAreLibjpegsInBothModes) {
  const std::vector<uint8_t> jpeg = Segmented(MakeDetailedJpeg(420, 300, 8, TJSAMP_420), 4);
  storage::Record rec = JpegRecord(jpeg, 420, 300, 3, 0);
  const auto segments = ReadRestartLayout(jpeg);
  ASSERT_OK(segments.status());
  rec.segment_offsets = EncodeSegmentOffsets(*segments);
  AugmentOptions aug;
  aug.size = 64;
  SampleProcessor own, lib;
  lib.set_own_huffman(false);
  std::vector<uint8_t> a(64 * 64 * 3), b(64 * 64 * 3);
  int own_used = 0;
  for (DecodeMode mode : {DecodeMode::kFast, DecodeMode::kExact}) {
    for (uint64_t i = 0; i < 24; ++i) {
      ASSERT_OK(own.Process(rec.view(), i, 0, 7, aug, mode, a.data()));
      ASSERT_OK(lib.Process(rec.view(), i, 0, 7, aug, mode, b.data()));
      own_used += own.last_used_own_huffman();
      EXPECT_FALSE(lib.last_used_own_huffman());
      EXPECT_TRUE(a == b) << DecodeModeName(mode) << " sample " << i;
    }
  }
  EXPECT_EQ(own_used, 48);  // every sample, from segments or whole
}

}  // namespace
}  // namespace ddpio::loader
