#include "ddpio/convert/convert.h"

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ddpio/common/internal/json_parse.h"
#include "ddpio/common/log.h"
#include "ddpio/common/ordered_parallel_map.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/image_decode.h"
#include "ddpio/convert/image_shrink.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/version.h"

namespace ddpio::convert {
namespace {

constexpr char kProgressKey[] = "convert_progress";

struct Loaded {
  absl::StatusOr<storage::Record> record;
  uint64_t bytes_read = 0;
  std::string stored_as;  // how the entry was stored, for the summary
};

// Per-thread decoding state.
struct Decoders {
  loader::JpegDecoder jpeg;
  std::vector<uint8_t> pixels;
  std::unique_ptr<Shrinker> shrinker;  // with --max-side
  int restart_interval = 0;            // --restart-interval: MCUs per segment, 0: none added
  ImageDecodeOptions image;            // non-JPEG images: pixel limit and memory budget
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

// Restart markers for the loader's segment decode (loader/jpeg_restart.h): JPEGs without suitable
// ones are transcoded losslessly, and the result is checked to decode to exactly the original's
// pixels. A JPEG the transcoder cannot handle keeps its bytes (the loader decodes it whole).
void AddRestarts(int interval, bool have_pixels, Decoders* d, storage::Record* r,
                 std::string* stored_as) {
  if (interval <= 0 || r->type != storage::ContentType::kJpeg) return;
  if (auto layout = loader::ReadRestartLayout(r->payload);
      layout.ok() && layout->interval <= interval) {
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

Loaded LoadEntry(SourceReader& reader, uint64_t index, const SourceEntry& entry, bool full_decode,
                 Decoders* d) {
  Loaded out{absl::UnknownError("unset")};
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

bool Skippable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDataLoss || s.code() == absl::StatusCode::kNotFound ||
         s.code() == absl::StatusCode::kPermissionDenied;
}

std::string ProgressJson(uint64_t next_source, const std::vector<SkippedFile>& skipped) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : skipped) {
    list.push_back({{"index", s.source_index}, {"source", s.relative}, {"reason", s.reason}});
  }
  return nlohmann::json{{"next_source", next_source}, {"skipped", list}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

absl::Status ParseConvertProgress(const std::string& text, uint64_t* next_source,
                                  std::vector<SkippedFile>* skipped) {
  const auto bad = [](const std::string& what) {
    return WithSetting(absl::DataLossError(absl::StrCat(
                           "the conversion progress entry is malformed (", what,
                           "); the dataset cannot be resumed: convert it again from the start")),
                       "resume");
  };
  // Too big, nested too deep or not JSON; the skipped list grows with the source, so the
  // general 64 MiB bound, not a tighter one.
  auto parsed = ParseJson(text, "the entry");
  if (!parsed.ok()) return bad(std::string(parsed.status().message()));
  nlohmann::json j = *std::move(parsed);
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("next_source") || !j["next_source"].is_number_unsigned())
    return bad("next_source");
  if (!j.contains("skipped") || !j["skipped"].is_array()) return bad("skipped");
  *next_source = j["next_source"].get<uint64_t>();
  for (const auto& s : j["skipped"]) {
    if (!s.is_object() || !s.contains("index") || !s["index"].is_number_unsigned() ||
        !s.contains("source") || !s["source"].is_string() || !s.contains("reason") ||
        !s["reason"].is_string()) {
      return bad("a skipped entry");
    }
    skipped->push_back({s["index"].get<uint64_t>(), s["source"].get<std::string>(),
                        s["reason"].get<std::string>()});
  }
  if (skipped->size() > *next_source) return bad("more skipped entries than entries done");
  return absl::OkStatus();
}

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

// Resumes the dataset at o.out (setting summary->resumed_from, the skipped entries and
// *next_source), or creates it. Null when it is already complete.
absl::StatusOr<std::unique_ptr<storage::DatasetWriter>> OpenWriter(
    const storage::DatasetHeader& header, const ConvertOptions& o, ConvertSummary* summary,
    uint64_t* next_source) {
  std::error_code ec;
  if (!o.resume || !std::filesystem::exists(o.out, ec))
    return storage::DatasetWriter::Create(o.out, header, o.writer);
  auto resumed = storage::DatasetWriter::Resume(o.out, header, o.writer);
  if (resumed.status().code() == absl::StatusCode::kAlreadyExists) {
    summary->already_complete = true;
    return nullptr;
  }
  if (!resumed.ok()) return resumed.status();
  std::unique_ptr<storage::DatasetWriter> writer = std::move(resumed).value();
  DDPIO_ASSIGN_OR_RETURN(auto progress, writer->GetMeta(kProgressKey));
  if (progress.has_value())
    DDPIO_RETURN_IF_ERROR(ParseConvertProgress(*progress, next_source, &summary->skipped));
  if (*next_source - summary->skipped.size() != writer->committed_count()) {
    return absl::DataLossError(absl::StrCat(
        o.out, ": progress says ", *next_source, " entries done with ", summary->skipped.size(),
        " skipped, but ", writer->committed_count(), " records are stored"));
  }
  summary->resumed_from = *next_source;
  return writer;
}

// Reports progress to the callback (at most every kProgressInterval, and when asked to) and to
// options.counters, and tells the conversion loop when to stop.
class ProgressReporter {
 public:
  static constexpr std::chrono::milliseconds kProgressInterval{100};

  ProgressReporter(const ConvertOptions& o, const ProgressCallback& callback, uint64_t total)
      : o_(o), callback_(callback), total_(total) {}

  // The run starts with `done` entries (of which `skipped` skipped) from before a resume.
  // Returns false to stop.
  bool Start(uint64_t done, uint64_t skipped) {
    done_ = done;
    skipped_ = skipped;
    if (o_.counters != nullptr) {
      o_.counters->entries.fetch_add(done, std::memory_order_relaxed);
      o_.counters->skipped.fetch_add(skipped, std::memory_order_relaxed);
    }
    if (o_.cancel != nullptr && o_.cancel->load(std::memory_order_relaxed)) return false;
    return Call(false);
  }

  // One more entry done. Returns false to stop.
  bool Entry(bool skipped, uint64_t bytes) {
    ++done_;
    skipped_ += skipped ? 1 : 0;
    bytes_ += bytes;
    if (o_.counters != nullptr) {
      o_.counters->entries.fetch_add(1, std::memory_order_relaxed);
      if (skipped) o_.counters->skipped.fetch_add(1, std::memory_order_relaxed);
      o_.counters->source_bytes.fetch_add(bytes, std::memory_order_relaxed);
    }
    if (o_.cancel != nullptr && o_.cancel->load(std::memory_order_relaxed)) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < kProgressInterval) return true;
    return Call(false);
  }

  void Finish() { Call(true); }

 private:
  bool Call(bool final) {
    last_ = std::chrono::steady_clock::now();
    if (!callback_) return true;
    return callback_(ConvertProgress{done_, total_, done_ - skipped_, skipped_, bytes_, final});
  }

  const ConvertOptions& o_;
  const ProgressCallback& callback_;
  const uint64_t total_;
  uint64_t done_ = 0;
  uint64_t skipped_ = 0;
  uint64_t bytes_ = 0;
  std::chrono::steady_clock::time_point last_;
};

absl::Status Cancelled(const ConvertOptions& o, uint64_t done, uint64_t total) {
  return WithSetting(absl::CancelledError(absl::StrCat(
                         "conversion into ", o.out, " cancelled after ", done, " of ", total,
                         " source entries; the dataset is incomplete: "
                         "convert again with resume to continue")),
                     "resume_conversion");
}

// Reads, validates and appends entries [next_source, end) in source order, committing each full
// batch together with the progress entry (what a resumed conversion continues from).
absl::Status CopyEntries(const SourceListing& listing, const ConvertOptions& o,
                         uint64_t next_source, storage::DatasetWriter& writer,
                         ConvertSummary* summary, ProgressReporter& progress) {
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
  uint64_t commits = 0;
  auto commit = [&](uint64_t next) -> absl::Status {
    DDPIO_RETURN_IF_ERROR(writer.PutMeta(kProgressKey, ProgressJson(next, summary->skipped)));
    DDPIO_RETURN_IF_ERROR(writer.Commit());
    if (o.observer != nullptr) o.observer->Committed(++commits);
    return absl::OkStatus();
  };
  const uint64_t total = listing.entries.size();
  if (!progress.Start(next_source, summary->skipped.size()))
    return Cancelled(o, next_source, total);
  OrderedParallelMap<Loaded> map(next_source, total, threads, 16 * static_cast<uint64_t>(threads),
                                 [&](uint64_t i, int worker) {
                                   return LoadEntry(reader, i, listing.entries[i], o.full_decode,
                                                    &*decoders[worker]);
                                 });
  for (uint64_t i = next_source; i < total; ++i) {
    std::optional<Loaded> loaded = map.Next();
    summary->source_bytes_read += loaded->bytes_read;
    if (!loaded->record.ok()) {
      const absl::Status& bad = loaded->record.status();
      if (!o.skip_invalid || !Skippable(bad)) {
        // Keep everything before the bad file: after fixing it, --resume continues from here.
        DDPIO_RETURN_IF_ERROR(commit(i));
        absl::Status stop(
            bad.code(),
            absl::StrCat(bad.message(), " (source entry ", i,
                         "; fix or remove the file, or skip invalid files; resuming continues "
                         "from here)"));
        // Keep the error's payloads: the setting it names (e.g. max_decode_bytes) becomes the flag.
        bad.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
          stop.SetPayload(url, payload);
        });
        return WithSetting(WithSetting(stop, "skip_invalid"), "resume");
      }
      summary->skipped.push_back({i, listing.entries[i].relative, std::string(bad.message())});
      DDPIO_LOG(WARNING) << "skipping " << bad.message();
    } else {
      DDPIO_RETURN_IF_ERROR(writer.Append(loaded->record->view()));
      ++summary->stored_as[loaded->stored_as];
    }
    if (writer.BatchFull()) DDPIO_RETURN_IF_ERROR(commit(i + 1));
    if (!progress.Entry(!loaded->record.ok(), loaded->bytes_read)) {
      // Stopped on request: commit what is done, so a resumed conversion continues after it.
      if (i + 1 < total) {
        DDPIO_RETURN_IF_ERROR(commit(i + 1));
        return Cancelled(o, i + 1, total);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConvertSummary> Convert(const SourceListing& listing, const ConvertOptions& o,
                                       const ProgressCallback& callback) {
  if (o.shards > 1) return ConvertSharded(listing, o, callback);
  const auto start = std::chrono::steady_clock::now();
  ConvertSummary summary;
  summary.source = listing.described;
  summary.out = o.out;
  summary.entries = listing.entries.size();
  summary.classes = listing.classes.size();
  uint64_t next_source = 0;
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<storage::DatasetWriter> writer,
                         OpenWriter(HeaderFor(listing, o), o, &summary, &next_source));
  ProgressReporter progress(o, callback, listing.entries.size());
  if (writer == nullptr) {  // already complete
    if (o.counters != nullptr)
      o.counters->entries.fetch_add(listing.entries.size(), std::memory_order_relaxed);
    return summary;
  }
  DDPIO_RETURN_IF_ERROR(CopyEntries(listing, o, next_source, *writer, &summary, progress));
  DDPIO_RETURN_IF_ERROR(
      writer->PutMeta(kProgressKey, ProgressJson(listing.entries.size(), summary.skipped)));
  DDPIO_RETURN_IF_ERROR(writer->Finish(summary.skipped.size()));
  summary.records = writer->record_count();
  summary.payload_bytes = writer->payload_bytes();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.Finish();
  return summary;
}

}  // namespace ddpio::convert
