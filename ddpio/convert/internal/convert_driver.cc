#include "ddpio/convert/internal/convert_driver.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/internal/json_parse.h"
#include "ddpio/common/log.h"
#include "ddpio/common/ordered_parallel_map.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_writer.h"

namespace ddpio::convert {
namespace {

constexpr char kProgressKey[] = "convert_progress";

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

namespace internal {
namespace {

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
absl::Status CopyEntries(const EntrySource& source, const ConvertOptions& o, uint64_t next_source,
                         storage::DatasetWriter& writer, ConvertSummary* summary,
                         ProgressReporter& progress) {
  uint64_t commits = 0;
  auto commit = [&](uint64_t next) -> absl::Status {
    if (source.before_commit) DDPIO_RETURN_IF_ERROR(source.before_commit(writer));
    DDPIO_RETURN_IF_ERROR(writer.PutMeta(kProgressKey, ProgressJson(next, summary->skipped)));
    DDPIO_RETURN_IF_ERROR(writer.Commit());
    if (o.observer != nullptr) o.observer->Committed(++commits);
    return absl::OkStatus();
  };
  const uint64_t total = source.count;
  if (!progress.Start(next_source, summary->skipped.size()))
    return Cancelled(o, next_source, total);
  const int workers = std::max(1, source.workers);
  OrderedParallelMap<LoadedEntry> map(next_source, total, workers,
                                      16 * static_cast<uint64_t>(workers), source.load);
  for (uint64_t i = next_source; i < total; ++i) {
    std::optional<LoadedEntry> loaded = map.Next();
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
      summary->skipped.push_back({i, source.name(i), std::string(bad.message())});
      DDPIO_LOG(WARNING) << "skipping " << bad.message();
    } else {
      DDPIO_RETURN_IF_ERROR(writer.Append(loaded->record->view()));
      if (source.appended) source.appended(*loaded->record);
      if (!loaded->stored_as.empty()) ++summary->stored_as[loaded->stored_as];
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

absl::StatusOr<ConvertSummary> RunConversion(const storage::DatasetHeader& header,
                                             const ConvertOptions& o, const EntrySource& source,
                                             const ProgressCallback& callback,
                                             ConvertSummary summary) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t next_source = 0;
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<storage::DatasetWriter> writer,
                         OpenWriter(header, o, &summary, &next_source));
  ProgressReporter progress(o, callback, source.count);
  if (writer == nullptr) {  // already complete
    if (o.counters != nullptr)
      o.counters->entries.fetch_add(source.count, std::memory_order_relaxed);
    return summary;
  }
  DDPIO_RETURN_IF_ERROR(CopyEntries(source, o, next_source, *writer, &summary, progress));
  if (source.before_commit) DDPIO_RETURN_IF_ERROR(source.before_commit(*writer));
  DDPIO_RETURN_IF_ERROR(writer->PutMeta(kProgressKey, ProgressJson(source.count, summary.skipped)));
  DDPIO_RETURN_IF_ERROR(writer->Finish(summary.skipped.size()));
  summary.records = writer->record_count();
  summary.payload_bytes = writer->payload_bytes();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.Finish();
  return summary;
}

}  // namespace internal
}  // namespace ddpio::convert
