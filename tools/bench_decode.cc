#include "tools/bench_decode.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "absl/strings/str_format.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/jpeg_region.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/loader/sample_processor.h"
#include "ddpio/storage/dataset_reader.h"
#include "tools/bench_ceiling.h"

namespace ddpio::tools {
namespace {

using Clock = std::chrono::steady_clock;

// A restart-marked record, held in memory: its bytes, the same image without markers, its layout.
struct Image {
  storage::Record record;
  std::vector<uint8_t> plain;
  loader::RestartLayout layout;
  uint64_t index = 0;
};

absl::StatusOr<std::vector<Image>> LoadImages(const storage::DatasetReader& reader, uint64_t n) {
  std::vector<Image> images;
  DDPIO_RETURN_IF_ERROR(ForEachSegmentedJpeg(
      reader, n,
      [&](uint64_t i, const storage::RecordView& rec, const loader::RestartLayout& layout) {
        auto plain = loader::RemoveRestartMarkers(rec.payload);
        if (!plain.ok()) return;
        images.push_back({storage::Record::FromView(rec), *std::move(plain), layout, i});
      }));
  return images;
}

struct Way {
  const char* name;
  std::function<absl::Status(const Image&)> decode;
};

}  // namespace

absl::StatusOr<nlohmann::json> BenchDecode(const BenchDecodeOptions& o) {
  if (o.rounds < 1) return absl::InvalidArgumentError("--rounds must be >= 1");
  DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(o.data));
  DDPIO_ASSIGN_OR_RETURN(const std::vector<Image> images, LoadImages(*reader, o.images));
  if (images.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(o.data, " has no restart-marked JPEG records among the ", o.images,
                     " sampled (convert writes them unless --restart-interval 0)"));
  }
  loader::RegionDecoder libjpeg, own, one_stream;
  libjpeg.set_own_huffman(false);
  own.set_own_huffman(true);
  one_stream.set_own_huffman(true);
  one_stream.set_huffman_streams(1);
  loader::SampleProcessor sample_lib, sample_own;
  sample_lib.set_own_huffman(false);
  sample_own.set_own_huffman(true);
  loader::AugmentOptions aug;
  aug.size = o.image_size;
  std::vector<uint8_t> pixels, out(static_cast<size_t>(o.image_size) * o.image_size * 3);
  // The whole image at 1/scale, through `d`, with its segments when `segments`.
  const auto full = [&](loader::RegionDecoder& d, const Image& im, bool plain, int scale) {
    const loader::RestartLayout& l = im.layout;
    const loader::ScanSegments segments{l.offsets, l.interval};
    const loader::Box all{0, 0, static_cast<double>(l.width), static_cast<double>(l.height)};
    loader::DecodedRegion region;
    return d.Decode(plain ? absl::Span<const uint8_t>(im.plain) : im.record.view().payload, all,
                    std::max(1, l.width / scale), std::max(1, l.height / scale), scale > 1,
                    /*full=*/true, /*fast_idct=*/false, &pixels, &region, nullptr,
                    plain ? nullptr : &segments);
  };
  const auto sample = [&](loader::SampleProcessor& p, const Image& im, loader::DecodeMode mode) {
    return p.Process(im.record.view(), im.index, 0, 0, aug, mode, out.data());
  };
  const std::vector<Way> ways = {
      {"full, no markers, libjpeg", [&](const Image& im) { return full(libjpeg, im, true, 1); }},
      {"full, markers, libjpeg", [&](const Image& im) { return full(libjpeg, im, false, 1); }},
      {"full, markers, ddpio", [&](const Image& im) { return full(own, im, false, 1); }},
      {"1/8, no markers, libjpeg", [&](const Image& im) { return full(libjpeg, im, true, 8); }},
      {"1/8, markers, libjpeg", [&](const Image& im) { return full(libjpeg, im, false, 8); }},
      {"1/8, markers, ddpio", [&](const Image& im) { return full(own, im, false, 8); }},
      {"1/8, markers, ddpio 1 stream",
       [&](const Image& im) { return full(one_stream, im, false, 8); }},
      {"sample fast, libjpeg",
       [&](const Image& im) { return sample(sample_lib, im, loader::DecodeMode::kFast); }},
      {"sample fast, ddpio",
       [&](const Image& im) { return sample(sample_own, im, loader::DecodeMode::kFast); }},
      {"sample exact, libjpeg",
       [&](const Image& im) { return sample(sample_lib, im, loader::DecodeMode::kExact); }},
      {"sample exact, ddpio",
       [&](const Image& im) { return sample(sample_own, im, loader::DecodeMode::kExact); }},
  };
  std::vector<std::vector<double>> ms(ways.size());
  for (int r = 0; r < o.rounds; ++r) {
    for (size_t k = 0; k < ways.size(); ++k) {
      const size_t w = r % 2 == 0 ? k : ways.size() - 1 - k;
      const auto t0 = Clock::now();
      for (const Image& im : images) {
        if (absl::Status st = ways[w].decode(im); !st.ok()) {
          return absl::DataLossError(
              absl::StrCat(ways[w].name, ": record ", im.index, ": ", st.message()));
        }
      }
      ms[w].push_back(std::chrono::duration<double>(Clock::now() - t0).count() * 1e3 /
                      static_cast<double>(images.size()));
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (size_t w = 0; w < ways.size(); ++w) {
    rows.push_back({{"way", ways[w].name}, {"ms_per_image", Median(ms[w])}, {"rounds_ms", ms[w]}});
  }
  return nlohmann::json{{"data", o.data},
                        {"images", images.size()},
                        {"rounds", o.rounds},
                        {"image_size", o.image_size},
                        {"ways", rows}};
}

std::string BenchDecodeText(const nlohmann::json& j) {
  std::string s = absl::StrFormat(
      "bench decode: %d restart-marked records, one thread, %d rounds (median ms per image; each "
      "round times every way in turn)\n",
      j["images"].get<uint64_t>(), j["rounds"].get<int>());
  double base = 0;
  for (const nlohmann::json& row : j["ways"]) {
    const std::string name = row["way"].get<std::string>();
    const double ms = row["ms_per_image"].get<double>();
    // Each group of ways is compared with its first (libjpeg's decode of the same bytes).
    if (name.find("no markers") != std::string::npos ||
        (name.find("sample") != std::string::npos && name.find("libjpeg") != std::string::npos)) {
      base = ms;
    }
    s += absl::StrFormat("  %-28s %7.3f ms  (%.2f of %s)\n", name, ms, base > 0 ? ms / base : 0,
                         name.find("sample") != std::string::npos ? "libjpeg's" : "no markers");
  }
  return s;
}

}  // namespace ddpio::tools
