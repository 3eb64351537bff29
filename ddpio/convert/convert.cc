#include "ddpio/convert/convert.h"

#include <filesystem>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/image_decode.h"
#include "ddpio/convert/image_shrink.h"
#include "ddpio/convert/internal/convert_driver.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_region.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/version.h"

namespace ddpio::convert {
namespace {

using internal::LoadedEntry;

// Per-thread decoding state.
struct Decoders {
  loader::JpegDecoder jpeg;
  std::vector<uint8_t> pixels;
  std::unique_ptr<Shrinker> shrinker;  // with --max-side
  int restart_interval = 0;            // --restart-interval: MCUs per segment, 0: none added
  ImageDecodeOptions image;            // non-JPEG images: pixel limit and memory budget
  // The loader's decoder, for JPEGs that keep restart markers of their own (made when first met).
  std::unique_ptr<loader::RegionDecoder> region = nullptr;
};

absl::Status CheckRaw(const SourceItem& item) {
  if (static_cast<uint64_t>(item.raw_width) * static_cast<uint64_t>(item.raw_height) * 3 !=
      item.bytes.size()) {
    return absl::DataLossError(absl::StrCat("raw pixels of ", item.bytes.size(), " bytes are not ",
                                            item.raw_width, "x", item.raw_height, "x3"));
  }
  return loader::CheckImagePixels(item.raw_width, item.raw_height, loader::kDefaultMaxImagePixels,
                                  "raw image");
}

// JPEGs keep their bytes here (validated by a full decode unless `full_decode` is off; the
// restart-marker transcode below may then re-write them losslessly); every other format
// torchvision reads is decoded as Pillow's convert("RGB") would and stored raw.
absl::Status FillRecord(SourceItem item, bool full_decode, Decoders* d, storage::Record* r,
                        std::string* stored_as) {
  r->original_width = static_cast<uint32_t>(item.original_width);
  r->original_height = static_cast<uint32_t>(item.original_height);
  if (item.raw_width > 0) {
    DDPIO_RETURN_IF_ERROR(CheckRaw(item));
    r->type = storage::ContentType::kRawUint8;
    r->width = static_cast<uint32_t>(item.raw_width);
    r->height = static_cast<uint32_t>(item.raw_height);
    r->channels = 3;
    r->payload = std::move(item.bytes);
    *stored_as = "raw RGB";
    return absl::OkStatus();
  }
  if (loader::LooksLikeJpeg(item.bytes)) {
    DDPIO_ASSIGN_OR_RETURN(loader::JpegInfo info, d->jpeg.ReadInfo(item.bytes));
    if (full_decode) DDPIO_RETURN_IF_ERROR(d->jpeg.Decode(item.bytes, info, &d->pixels));
    r->type = storage::ContentType::kJpeg;
    r->channels = static_cast<uint16_t>(info.channels);
    r->height = static_cast<uint32_t>(info.height);
    r->width = static_cast<uint32_t>(info.width);
    r->payload = std::move(item.bytes);
    *stored_as = info.channels == 4 ? "JPEG, CMYK (original bytes)" : "JPEG (original bytes)";
    return absl::OkStatus();
  }
  if (SniffImageFormat(item.bytes).empty()) {
    return absl::DataLossError(
        absl::StrCat(loader::DescribeNonJpeg(item.bytes),
                     "; ddpio reads JPEG, PNG, WebP, BMP, TIFF, PPM and PGM images"));
  }
  DDPIO_ASSIGN_OR_RETURN(DecodedImage image, DecodeImage(item.bytes, d->image));
  r->type = storage::ContentType::kRawUint8;
  r->width = static_cast<uint32_t>(image.width);
  r->height = static_cast<uint32_t>(image.height);
  r->channels = 3;
  r->payload = std::move(image.rgb);
  *stored_as =
      absl::StrCat(image.format, image.detail.empty() ? "" : absl::StrCat(" (", image.detail, ")"),
                   " -> raw RGB");
  return absl::OkStatus();
}

// Whether the loader's decoder, ddpio's Huffman decoder over the segments of `layout`
// (loader/jpeg_huffman.h), decodes `jpeg` whole. It refuses bytes left over before a restart
// marker, which libjpeg lets by when its read-ahead has already met the marker.
bool LoaderDecodes(const std::vector<uint8_t>& jpeg, const loader::RestartLayout& layout,
                   Decoders* d) {
  const loader::ScanSegments segments{layout.offsets, layout.interval};
  const loader::Box all{0, 0, static_cast<double>(layout.width),
                        static_cast<double>(layout.height)};
  loader::DecodedRegion region;
  std::vector<uint8_t> pixels;
  if (d->region == nullptr) d->region = std::make_unique<loader::RegionDecoder>();
  return d->region
      ->Decode(jpeg, all, layout.width, layout.height, /*allow_scaling=*/false, /*full=*/true,
               /*fast_idct=*/false, &pixels, &region, nullptr, &segments)
      .ok();
}

// Restart markers for the loader's segment decode (loader/jpeg_restart.h): JPEGs without suitable
// ones are transcoded losslessly, and the result is checked to decode to exactly the original's
// pixels. A JPEG with suitable markers of its own keeps its bytes when the loader's decoder takes
// them, and is transcoded like the others when it does not. A JPEG the transcoder cannot handle
// keeps its bytes (the loader decodes it whole).
void AddRestarts(int interval, bool have_pixels, Decoders* d, storage::Record* r,
                 std::string* stored_as) {
  if (interval <= 0 || r->type != storage::ContentType::kJpeg) return;
  if (auto layout = loader::ReadRestartLayout(r->payload);
      layout.ok() && layout->interval <= interval && LoaderDecodes(r->payload, *layout, d)) {
    r->segment_offsets =
        loader::EncodeSegmentOffsets(*layout);  // suitable markers already: keep the bytes
    return;
  }
  absl::StatusOr<std::vector<uint8_t>> segmented = loader::AddRestartMarkers(r->payload, interval);
  if (!segmented.ok()) return;
  // d->pixels holds the original's full decode when validation made one (FillRecord's last decode).
  std::vector<uint8_t> after;
  auto info = d->jpeg.ReadInfo(r->payload);
  auto info2 = d->jpeg.ReadInfo(*segmented);
  if (!info.ok() || !info2.ok() ||
      (!have_pixels && !d->jpeg.Decode(r->payload, *info, &d->pixels).ok()) ||
      !d->jpeg.Decode(*segmented, *info2, &after).ok() || d->pixels != after) {
    DDPIO_LOG(WARNING) << r->source_name
                       << ": restart-marker transcode did not reproduce the pixels; kept as is";
    return;
  }
  auto layout = loader::ReadRestartLayout(*segmented);
  if (!layout.ok()) return;  // an interval the transcoder could not make tile the rows
  r->segment_offsets = loader::EncodeSegmentOffsets(*layout);
  r->payload = std::move(segmented).value();
  const std::string kept = "(original bytes)";
  if (size_t at = stored_as->find(kept); at != std::string::npos)
    stored_as->replace(at, kept.size(), "(coefficients)");
  absl::StrAppend(stored_as, ", restart markers added");
}

LoadedEntry LoadEntry(SourceReader& reader, uint64_t index, const SourceEntry& entry,
                      bool full_decode, Decoders* d) {
  LoadedEntry out;
  auto item = reader.Read(index, entry);
  if (!item.ok()) {
    out.record = item.status();
    return out;
  }
  out.bytes_read = item->bytes.size();
  storage::Record r;
  r.label = entry.label;
  r.source_name = entry.relative;
  absl::Status filled = FillRecord(std::move(item).value(), full_decode, d, &r, &out.stored_as);
  bool reencoded = false;
  if (filled.ok() && d->shrinker != nullptr) {
    absl::StatusOr<bool> shrunk = d->shrinker->Apply(&r);
    filled = shrunk.status();
    if (shrunk.ok() && *shrunk) {
      reencoded = true;
      out.stored_as = r.type == storage::ContentType::kJpeg
                          ? "JPEG, shrunk to the largest side allowed and re-encoded"
                          : "raw RGB, shrunk to the largest side allowed";
    }
  }
  // The validation decode's pixels are the original's unless the image was shrunk (re-encoded).
  if (filled.ok()) {
    AddRestarts(d->restart_interval, full_decode && !reencoded, d, &r, &out.stored_as);
  }
  if (!filled.ok()) {
    out.record = Annotate(filled, reader.Describe(entry));
    return out;
  }
  out.record = std::move(r);
  return out;
}

}  // namespace

std::string ConvertFingerprint(const SourceListing& listing, const ConvertOptions& o) {
  return ListingFingerprint(
      listing,
      absl::StrCat("skip_invalid=", o.skip_invalid, ";full_decode=", o.full_decode,
                   o.shrink.max_side > 0 ? absl::StrCat(";max_side=", o.shrink.max_side,
                                                        ";quality=", o.shrink.quality)
                                         : "",
                   o.shards > 1 ? absl::StrCat(";shards=", o.shards) : "",
                   o.restart_interval > 0 ? absl::StrCat(";restart=", o.restart_interval) : ""));
}

namespace {

storage::DatasetHeader HeaderFor(const SourceListing& listing, const ConvertOptions& o) {
  storage::DatasetHeader header;
  header.classes = listing.classes;
  header.source_kind = listing.kind;
  header.source_path = listing.described;
  header.source_files = listing.entries.size();
  header.source_fingerprint = ConvertFingerprint(listing, o);
  // Format 3: every record bound to its key and dataset (record layout 3, which also carries the
  // extensions: original geometry of --max-side, segment offsets of restart markers).
  header.format_version = storage::kBoundRecordsFormatVersion;
  header.shard_index = o.shard_index;
  header.shard_count = o.shard_count;
  header.dataset_fingerprint = o.dataset_fingerprint;
  header.tool_version = DDPIO_VERSION;
  return header;
}

}  // namespace

absl::StatusOr<ConvertSummary> Convert(const SourceListing& listing, const ConvertOptions& o,
                                       const ProgressCallback& callback) {
  if (o.shards > 1) return ConvertSharded(listing, o, callback);
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::optional<Decoders>> decoders(threads);
  for (auto& d : decoders) {
    DDPIO_ASSIGN_OR_RETURN(auto decoder, loader::JpegDecoder::Create());
    d.emplace(Decoders{std::move(decoder), {}, nullptr, o.restart_interval});
    d->image.max_decode_bytes = o.max_decode_bytes;
    if (o.shrink.max_side > 0) {
      DDPIO_ASSIGN_OR_RETURN(d->shrinker, Shrinker::Create(o.shrink));
    }
  }
  FileSourceReader files(listing.root);
  SourceReader& reader = o.reader != nullptr ? *o.reader : files;
  internal::EntrySource source;
  source.count = listing.entries.size();
  source.workers = threads;
  source.load = [&](uint64_t i, int worker) {
    return LoadEntry(reader, i, listing.entries[i], o.full_decode, &*decoders[worker]);
  };
  source.name = [&](uint64_t i) { return listing.entries[i].relative; };
  ConvertSummary summary;
  summary.source = listing.described;
  summary.out = o.out;
  summary.entries = listing.entries.size();
  summary.classes = listing.classes.size();
  return internal::RunConversion(HeaderFor(listing, o), o, source, callback, std::move(summary));
}

}  // namespace ddpio::convert
