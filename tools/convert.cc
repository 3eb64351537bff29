#include "tools/convert.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/ordered_parallel_map.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/jpeg.h"
#include "tools/cli_util.h"
#include "tools/cli_progress.h"

namespace ddpio::tools {
namespace {

constexpr char kProgressKey[] = "convert_progress";

// Source files larger than this are refused: no photo is 1 GiB, and a source pointing at a huge
// file (or a device through a symlink) must not exhaust memory.
constexpr uint64_t kMaxSourceFileBytes = uint64_t{1} << 30;

// An error that is this file's fault (skippable with --skip-invalid), or the machine's.
absl::Status FileError(int err, const char* what) {
  switch (err) {
    case ELOOP:
    case EIO:
    case ENXIO:
    case ENODEV:
    case EISDIR:
    case ENAMETOOLONG:
      return absl::DataLossError(absl::StrCat(what, ": ", std::strerror(err)));
    default:
      return ErrnoToStatus(err, what);
  }
}

absl::StatusOr<std::vector<uint8_t>> ReadWholeFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO named like a photo must not wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return FileError(errno, "cannot open");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return FileError(err, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::DataLossError(S_ISFIFO(st.st_mode)  ? "not a regular file (a FIFO)"
                               : S_ISCHR(st.st_mode) ? "not a regular file (a character device)"
                               : S_ISBLK(st.st_mode) ? "not a regular file (a block device)"
                               : S_ISSOCK(st.st_mode) ? "not a regular file (a socket)"
                                                      : "not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxSourceFileBytes) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat("file of ", st.st_size, " bytes, more than the limit of ",
                                            kMaxSourceFileBytes, " for one image"));
  }
  std::vector<uint8_t> data;
  data.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return FileError(err, "cannot read");
    }
    if (n == 0) break;
    if (data.size() + static_cast<size_t>(n) > kMaxSourceFileBytes) {  // it grew while read
      ::close(fd);
      return absl::DataLossError(absl::StrCat("file grew past the limit of ", kMaxSourceFileBytes, " bytes"));
    }
    data.insert(data.end(), buf, buf + n);
  }
  ::close(fd);
  return data;
}

struct Loaded {
  absl::StatusOr<storage::Record> record;
  uint64_t bytes_read = 0;
};

Loaded LoadEntry(const SourceListing& listing, const SourceEntry& entry, bool full_decode,
                 loader::JpegDecoder* decoder, std::vector<uint8_t>* pixels) {
  Loaded out{absl::UnknownError("unset")};
  const std::string path = (std::filesystem::path(listing.root) / entry.relative).string();
  auto data = ReadWholeFile(path);
  if (!data.ok()) {
    out.record = Annotate(data.status(), path);
    return out;
  }
  out.bytes_read = data->size();
  auto info = decoder->ReadInfo(*data);
  if (!info.ok()) {
    out.record = Annotate(info.status(), path);
    return out;
  }
  if (full_decode) {
    absl::Status decoded = decoder->Decode(*data, *info, pixels);
    if (!decoded.ok()) {
      out.record = Annotate(decoded, path);
      return out;
    }
  }
  storage::Record r;
  r.label = entry.label;
  r.type = storage::ContentType::kJpeg;
  r.channels = static_cast<uint16_t>(info->channels);
  r.height = static_cast<uint32_t>(info->height);
  r.width = static_cast<uint32_t>(info->width);
  r.source_name = entry.relative;
  r.payload = std::move(data).value();
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
    return absl::DataLossError(absl::StrCat("the conversion progress entry is malformed (", what,
                                            "); the dataset cannot be resumed: convert again without --resume"));
  };
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (!j.contains("next_source") || !j["next_source"].is_number_unsigned()) return bad("next_source");
  if (!j.contains("skipped") || !j["skipped"].is_array()) return bad("skipped");
  *next_source = j["next_source"].get<uint64_t>();
  for (const auto& s : j["skipped"]) {
    if (!s.is_object() || !s.contains("index") || !s["index"].is_number_unsigned() || !s.contains("source") ||
        !s["source"].is_string() || !s.contains("reason") || !s["reason"].is_string()) {
      return bad("a skipped entry");
    }
    skipped->push_back({s["index"].get<uint64_t>(), s["source"].get<std::string>(), s["reason"].get<std::string>()});
  }
  if (skipped->size() > *next_source) return bad("more skipped entries than entries done");
  return absl::OkStatus();
}

namespace {

storage::DatasetHeader HeaderFor(const SourceListing& listing, const ConvertOptions& o) {
  storage::DatasetHeader header;
  header.classes = listing.classes;
  header.source_kind = listing.kind;
  header.source_path = listing.described;
  header.source_files = listing.entries.size();
  header.source_fingerprint = ListingFingerprint(
      listing, absl::StrCat("skip_invalid=", o.skip_invalid, ";full_decode=", o.full_decode));
  header.tool_version = kVersion;
  return header;
}

// Resumes the dataset at o.out (setting summary->resumed_from, the skipped entries and
// *next_source), or creates it. Null when it is already complete.
absl::StatusOr<std::unique_ptr<storage::DatasetWriter>> OpenWriter(const storage::DatasetHeader& header,
                                                                   const ConvertOptions& o, ConvertSummary* summary,
                                                                   uint64_t* next_source) {
  std::error_code ec;
  if (!o.resume || !std::filesystem::exists(o.out, ec)) return storage::DatasetWriter::Create(o.out, header, o.writer);
  auto resumed = storage::DatasetWriter::Resume(o.out, header, o.writer);
  if (resumed.status().code() == absl::StatusCode::kAlreadyExists) {
    summary->already_complete = true;
    return nullptr;
  }
  if (!resumed.ok()) return resumed.status();
  std::unique_ptr<storage::DatasetWriter> writer = std::move(resumed).value();
  DDPIO_ASSIGN_OR_RETURN(auto progress, writer->GetMeta(kProgressKey));
  if (progress.has_value()) DDPIO_RETURN_IF_ERROR(ParseConvertProgress(*progress, next_source, &summary->skipped));
  if (*next_source - summary->skipped.size() != writer->committed_count()) {
    return absl::DataLossError(absl::StrCat(o.out, ": progress says ", *next_source, " entries done with ",
                                            summary->skipped.size(), " skipped, but ", writer->committed_count(),
                                            " records are stored"));
  }
  summary->resumed_from = *next_source;
  return writer;
}

// Reads, validates and appends entries [next_source, end) in source order, committing each full
// batch together with the progress entry (what --resume continues from).
absl::Status CopyEntries(const SourceListing& listing, const ConvertOptions& o, uint64_t next_source,
                         storage::DatasetWriter& writer, ConvertSummary* summary) {
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::optional<loader::JpegDecoder>> decoders(threads);
  std::vector<std::vector<uint8_t>> pixels(threads);
  for (auto& d : decoders) {
    DDPIO_ASSIGN_OR_RETURN(auto decoder, loader::JpegDecoder::Create());
    d.emplace(std::move(decoder));
  }
  uint64_t commits = 0;
  auto commit = [&](uint64_t next) -> absl::Status {
    DDPIO_RETURN_IF_ERROR(writer.PutMeta(kProgressKey, ProgressJson(next, summary->skipped)));
    DDPIO_RETURN_IF_ERROR(writer.Commit());
    if (o.observer != nullptr) o.observer->Committed(++commits);
    return absl::OkStatus();
  };
  Progress progress("convert", listing.entries.size(), o.progress);
  OrderedParallelMap<Loaded> map(next_source, listing.entries.size(), threads, 16 * static_cast<uint64_t>(threads),
                                 [&](uint64_t i, int worker) {
                                   return LoadEntry(listing, listing.entries[i], o.full_decode, &*decoders[worker],
                                                    &pixels[worker]);
                                 });
  for (uint64_t i = next_source; i < listing.entries.size(); ++i) {
    std::optional<Loaded> loaded = map.Next();
    summary->source_bytes_read += loaded->bytes_read;
    if (!loaded->record.ok()) {
      const absl::Status& bad = loaded->record.status();
      if (!o.skip_invalid || !Skippable(bad)) {
        // Keep everything before the bad file: after fixing it, --resume continues from here.
        DDPIO_RETURN_IF_ERROR(commit(i));
        return absl::Status(bad.code(), absl::StrCat(bad.message(), " (source entry ", i,
                                                     "; fix or remove the file, or pass --skip-invalid; "
                                                     "--resume continues)"));
      }
      summary->skipped.push_back({i, listing.entries[i].relative, std::string(bad.message())});
      DDPIO_LOG(WARNING) << "skipping " << bad.message();
    } else {
      DDPIO_RETURN_IF_ERROR(writer.Append(loaded->record->view()));
    }
    if (writer.BatchFull()) DDPIO_RETURN_IF_ERROR(commit(i + 1));
    progress.Update(i + 1);
  }
  progress.Finish(listing.entries.size());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConvertSummary> Convert(const SourceListing& listing, const ConvertOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  ConvertSummary summary;
  summary.classes = listing.classes.size();
  uint64_t next_source = 0;
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<storage::DatasetWriter> writer,
                         OpenWriter(HeaderFor(listing, o), o, &summary, &next_source));
  if (writer == nullptr) return summary;  // already complete
  DDPIO_RETURN_IF_ERROR(CopyEntries(listing, o, next_source, *writer, &summary));
  DDPIO_RETURN_IF_ERROR(writer->PutMeta(kProgressKey, ProgressJson(listing.entries.size(), summary.skipped)));
  DDPIO_RETURN_IF_ERROR(writer->Finish(summary.skipped.size()));
  summary.records = writer->record_count();
  summary.payload_bytes = writer->payload_bytes();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace ddpio::tools
