#include "tools/inspect.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/ordered_parallel_map.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/jpeg.h"
#include "ddpio/loader/jpeg_restart.h"
#include "ddpio/loader/sample_processor.h"
#include "ddpio/storage/checksum.h"
#include "ddpio/storage/dataset_reader.h"
#include "tools/cli_progress.h"
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

struct Scanned {
  absl::Status status;
  int32_t label = 0;
  uint64_t payload = 0;
  uint32_t width = 0, height = 0;
  uint32_t digest = 0;  // CRC32C of this record's fields and payload
  bool jpeg = false, segmented = false, shrunk = false;
  uint64_t tokens = 0;  // a token record's ids
};

// A token dataset's record: of the dataset's id width, and with verify every id in the vocabulary
// (when the dataset knows it).
absl::Status CheckTokenRecord(const storage::RecordView& view, const storage::TokenInfo& tokens,
                              bool verify) {
  const int width = storage::TokenWidth(view.type);
  if (width != tokens.width) {
    return absl::DataLossError(absl::StrCat("a ", storage::ContentTypeName(view.type),
                                            " record in a token dataset of ", 8 * tokens.width,
                                            "-bit ids"));
  }
  if (!verify || tokens.vocab_size == 0) return absl::OkStatus();
  const size_t count = view.payload.size() / static_cast<size_t>(width);
  for (size_t k = 0; k < count; ++k) {
    const uint32_t id = storage::TokenAt(view.payload, width, k);
    if (id >= tokens.vocab_size) {
      return absl::DataLossError(absl::StrCat("id ", k, " of the document is ", id,
                                              ", past the vocabulary of ", tokens.vocab_size));
    }
  }
  return absl::OkStatus();
}

uint32_t RecordDigest(const storage::RecordView& v) {
  uint8_t fields[16];
  EncodeFixed32(fields, static_cast<uint32_t>(v.label));
  EncodeFixed32(fields + 4, (static_cast<uint32_t>(v.type) << 16) | v.channels);
  EncodeFixed32(fields + 8, v.height);
  EncodeFixed32(fields + 12, v.width);
  uint32_t crc = storage::Crc32c(fields, sizeof(fields));
  crc = storage::Crc32c(v.source_name.data(), v.source_name.size(), crc);
  if (v.original_width != 0 || v.original_height != 0) {  // only then: older digests stay the same
    EncodeFixed32(fields, v.original_height);
    EncodeFixed32(fields + 4, v.original_width);
    crc = storage::Crc32c(fields, 8, crc);
  }
  crc = storage::Crc32c(v.segment_offsets.data(), v.segment_offsets.size(), crc);
  return storage::Crc32c(v.payload.data(), v.payload.size(), crc);
}

// The loader trusts recorded segment offsets after checking the bytes at each (an RSTn marker
// before every segment): offsets pointing at the wrong markers would pass that and cut the wrong
// segments. Verification holds them to the JPEG itself: they must be exactly the restart markers a
// scan of the entropy-coded data finds.
absl::Status CheckSegmentOffsets(const storage::RecordView& view) {
  absl::StatusOr<loader::RestartLayout> recorded =
      loader::RestartLayoutFromOffsets(view.payload, view.segment_offsets);
  if (!recorded.ok()) return Annotate(recorded.status(), "the recorded restart segment offsets");
  absl::StatusOr<loader::RestartLayout> scanned = loader::ReadRestartLayout(view.payload);
  if (!scanned.ok()) return Annotate(scanned.status(), "the JPEG's restart segments");
  if (scanned->offsets != recorded->offsets) {
    size_t i = 0;
    while (i < scanned->offsets.size() && i < recorded->offsets.size() &&
           scanned->offsets[i] == recorded->offsets[i])
      ++i;
    return absl::DataLossError(absl::StrCat(
        "the recorded restart segment offsets are not the JPEG's: segment ", i, " starts at byte ",
        i < scanned->offsets.size() ? absl::StrCat(scanned->offsets[i]) : "(none)",
        ", the record says ",
        i < recorded->offsets.size() ? absl::StrCat(recorded->offsets[i]) : "(none)",
        " (the loader would decode the wrong segments)"));
  }
  return absl::OkStatus();
}

Scanned ScanOne(storage::ReadTxn& txn, uint64_t index, size_t classes,
                const storage::TokenInfo& tokens, const std::vector<uint32_t>& lengths, bool verify,
                bool decode, loader::SampleProcessor* processor, std::vector<uint8_t>* pixels) {
  Scanned s;
  auto view = txn.Get(index);
  if (!view.ok()) {
    s.status = view.status();
    return s;
  }
  s.label = view->label;
  s.payload = view->payload.size();
  s.width = view->width;
  s.height = view->height;
  s.digest = RecordDigest(*view);
  if (tokens.width != 0) {
    s.status = CheckTokenRecord(*view, tokens, verify || decode);
    s.tokens = view->payload.size() / static_cast<size_t>(tokens.width);
    // The lengths the conversion recorded are what packing plans with: a record must hold its.
    if (s.status.ok() && (verify || decode) && !lengths.empty() && s.tokens != lengths[index]) {
      s.status = absl::DataLossError(absl::StrCat("the document holds ", s.tokens,
                                                  " ids, but the dataset's recorded lengths say ",
                                                  lengths[index]));
    }
    if (absl::Status mapped = txn.CheckMapped(); !mapped.ok()) s.status = mapped;
    return s;
  }
  if (storage::TokenWidth(view->type) != 0) {
    s.status = absl::DataLossError(
        absl::StrCat("a ", storage::ContentTypeName(view->type), " record in an image dataset"));
    return s;
  }
  if (view->label < 0 || static_cast<size_t>(view->label) >= classes) {
    s.status =
        absl::DataLossError(absl::StrCat("label ", view->label, " outside [0, ", classes, ")"));
    return s;
  }
  s.jpeg = view->type == storage::ContentType::kJpeg;
  s.shrunk = view->original_width != 0;
  if (s.jpeg) {
    s.segmented = loader::RecordRestartLayout(view->payload, view->segment_offsets).ok();
  }
  if (verify && s.jpeg && !view->segment_offsets.empty()) s.status = CheckSegmentOffsets(*view);
  if (decode && s.status.ok()) {
    // The loader's own decode path, whole image at full size: "verified" means "the loader can
    // decode it", for every stored type.
    s.status = processor->DecodeWhole(*view, pixels);
  }
  // The digest and the decode read the map after Get: a page that faulted meanwhile read as zeros,
  // and the real cause (the file changed under us) outranks any symptom.
  if (absl::Status mapped = txn.CheckMapped(); !mapped.ok()) s.status = mapped;
  return s;
}

}  // namespace

void MinMax::Add(uint64_t v) {
  min = count == 0 ? v : std::min(min, v);
  max = count == 0 ? v : std::max(max, v);
  sum += v;
  ++count;
}

absl::StatusOr<InspectReport> Inspect(const InspectOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  storage::ReaderOptions ro;
  ro.verify_checksums = o.verify || o.decode;
  ro.readahead = true;  // a full scan in index order is sequential
  ro.store_overrides = o.store;
  DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(o.path, ro));
  InspectReport r;
  r.path = o.path;
  r.header = reader->header();
  r.completion = reader->completion();
  r.file_bytes = reader->file_bytes();
  r.no_lock = reader->no_lock();
  r.verified = ro.verify_checksums;
  r.shards = reader->shard_count();
  r.decoded = o.decode;
  r.class_counts.assign(r.header.classes.size(), 0);
  if (reader->remote() != nullptr && !ro.verify_checksums) {
    // Counting classes would fetch the whole dataset: what its manifest says is the summary.
    r.records_read = false;
    r.store = reader->remote()->counters();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }

  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::optional<storage::ReadTxn>> txns(threads);
  std::vector<std::unique_ptr<loader::SampleProcessor>> decoders(threads);
  std::vector<std::vector<uint8_t>> pixels(threads);
  for (int t = 0; t < threads; ++t) {
    DDPIO_ASSIGN_OR_RETURN(auto txn, reader->BeginRead());
    txns[t].emplace(std::move(txn));
    decoders[t] = std::make_unique<loader::SampleProcessor>();
  }
  const size_t classes = r.header.classes.size();
  uint32_t digest = 0;
  {
    OrderedParallelMap<Scanned> map(
        0, reader->size(), threads, 64 * static_cast<uint64_t>(threads), [&](uint64_t i, int w) {
          return ScanOne(*txns[w], i, classes, r.header.tokens, reader->recorded_document_lengths(),
                         ro.verify_checksums, o.decode, decoders[w].get(), &pixels[w]);
        });
    Progress progress(o.decode ? "inspect --decode" : "inspect", reader->size(), o.progress);
    // In an object store every record is a request: ask for the next ones while these are
    // scanned, so that they come coalesced, many in flight (a local dataset has readahead).
    std::optional<storage::ReadTxn> ahead;
    if (reader->remote() != nullptr) {
      DDPIO_ASSIGN_OR_RETURN(auto txn, reader->BeginRead());
      ahead.emplace(std::move(txn));
    }
    constexpr uint64_t kAhead = 512;
    for (uint64_t i = 0; i < reader->size(); ++i) {
      if (ahead.has_value() && i % kAhead == 0) {
        std::vector<uint64_t> next;
        for (uint64_t k = i; k < std::min(reader->size(), i + 2 * kAhead); ++k) next.push_back(k);
        DDPIO_RETURN_IF_ERROR(ahead->Prefetch(next).status());
      }
      std::optional<Scanned> s = map.Next();
      digest = storage::Crc32c(&s->digest, sizeof(s->digest), digest);
      if (!s->status.ok()) {
        r.bad.push_back({i, storage::IndexKeyHex(i), std::string(s->status.message())});
        continue;
      }
      if (storage::IsTokenDataset(r.header)) {
        r.document_tokens.Add(s->tokens);
        progress.Update(i + 1);
        continue;
      }
      ++r.class_counts[static_cast<size_t>(s->label)];
      r.payload.Add(s->payload);
      r.width.Add(s->width);
      r.height.Add(s->height);
      (s->jpeg ? r.jpeg_records : r.raw_records) += 1;
      r.segmented += s->segmented;
      r.shrunk += s->shrunk;
      progress.Update(i + 1);
    }
    progress.Finish(reader->size());
  }
  r.content_digest = absl::StrFormat("%08x", digest);
  if (reader->remote() != nullptr) r.store = reader->remote()->counters();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

uint64_t TokenCount(const InspectReport& r) {
  return r.header.tokens.width == 0 ? 0 : r.completion.payload_bytes / r.header.tokens.width;
}

nlohmann::json InspectJson(const InspectReport& r) {
  nlohmann::json classes = nlohmann::json::array();
  for (size_t c = 0; c < r.header.classes.size(); ++c) {
    classes.push_back(
        {{"name", r.header.classes[c]},
         {"count", r.records_read ? nlohmann::json(r.class_counts[c]) : nlohmann::json()}});
  }
  nlohmann::json bad = nlohmann::json::array();
  for (const auto& b : r.bad)
    bad.push_back({{"index", b.index}, {"key", b.key}, {"reason", b.reason}});
  const bool token = storage::IsTokenDataset(r.header);
  nlohmann::json vocabulary;  // null for images
  if (token) {
    vocabulary = {{"dtype", r.header.tokens.width == 2 ? "uint16" : "uint32"},
                  {"vocab_size", r.header.tokens.vocab_size},
                  {"eos_id", r.header.tokens.eos_id},
                  {"tokenizer", r.header.tokens.tokenizer},
                  {"document_tokens_min",
                   r.records_read ? nlohmann::json(r.document_tokens.min) : nlohmann::json()},
                  {"document_tokens_max",
                   r.records_read ? nlohmann::json(r.document_tokens.max) : nlohmann::json()}};
  }
  return {{"path", r.path},
          {"documents", token ? nlohmann::json(r.completion.sample_count) : nlohmann::json()},
          {"tokens", token ? nlohmann::json(TokenCount(r)) : nlohmann::json()},
          {"token_vocabulary", vocabulary},
          {"format_version", r.header.format_version},
          {"record_protection", storage::RecordProtection(r.header)},
          {"records_bound", storage::RecordsBound(r.header)},
          {"records", r.completion.sample_count},
          {"classes", classes},
          {"payload_bytes", r.completion.payload_bytes},
          {"file_bytes", r.file_bytes},
          {"payload_min", r.payload.min},
          {"payload_max", r.payload.max},
          {"width_min", r.width.min},
          {"width_max", r.width.max},
          {"height_min", r.height.min},
          {"height_max", r.height.max},
          {"skipped_at_conversion", r.completion.skipped},
          {"jpeg_records", r.jpeg_records},
          {"raw_records", r.raw_records},
          {"segment_decodable", r.segmented},
          {"shrunk_by_max_side", r.shrunk},
          {"shards", r.shards},
          {"source", {{"kind", r.header.source_kind}, {"path", r.header.source_path}}},
          {"tool_version", r.header.tool_version},
          {"verified", r.verified},
          {"decoded", r.decoded},
          {"bad", bad},
          {"content_digest", r.records_read ? nlohmann::json(r.content_digest) : nlohmann::json()},
          {"records_read", r.records_read},
          {"store", r.store.has_value() ? StoreCountersJson(*r.store) : nlohmann::json()},
          {"seconds", r.seconds}};
}

std::string InspectText(const InspectReport& r) {
  std::string out;
  absl::StrAppendFormat(&out, "dataset       %s\n", r.path);
  absl::StrAppendFormat(&out, "format        ddpio-lmdb version %d, made by ddpio %s from %s %s\n",
                        r.header.format_version, r.header.tool_version, r.header.source_kind,
                        r.header.source_path);
  absl::StrAppendFormat(&out, "protection    %s\n", storage::RecordProtection(r.header));
  absl::StrAppendFormat(&out, "records       %d (%d skipped at conversion)\n",
                        r.completion.sample_count, r.completion.skipped);
  absl::StrAppendFormat(&out, "size          %s of payload, %s on disk\n",
                        HumanBytes(static_cast<double>(r.completion.payload_bytes)),
                        HumanBytes(static_cast<double>(r.file_bytes)));
  if (!r.records_read) {
    absl::StrAppendFormat(&out,
                          "records       not read: summarised from the store's manifest (--verify "
                          "reads and checks every record, and gives the counts per class, the "
                          "sizes and the digest)\n");
  }
  if (storage::IsTokenDataset(r.header)) {
    const storage::TokenInfo& t = r.header.tokens;
    absl::StrAppendFormat(&out, "documents     %d, %d tokens\n", r.completion.sample_count,
                          TokenCount(r));
    absl::StrAppendFormat(
        &out, "vocabulary    %s ids, %s, EOS %s%s\n", t.width == 2 ? "uint16" : "uint32",
        t.vocab_size > 0 ? absl::StrCat(t.vocab_size, " pieces") : "size not recorded",
        t.eos_id >= 0 ? absl::StrCat(t.eos_id) : "none (no document boundaries in the source)",
        t.tokenizer.empty() ? "" : absl::StrCat(", tokenizer ", t.tokenizer));
    if (r.document_tokens.count > 0) {
      absl::StrAppendFormat(&out, "document      min %d, mean %.1f, max %d tokens\n",
                            r.document_tokens.min,
                            static_cast<double>(r.document_tokens.sum) / r.document_tokens.count,
                            r.document_tokens.max);
    }
  }
  if (r.payload.count > 0) {
    absl::StrAppendFormat(&out, "payload       min %s, mean %s, max %s\n",
                          HumanBytes(static_cast<double>(r.payload.min)),
                          HumanBytes(static_cast<double>(r.payload.sum) / r.payload.count),
                          HumanBytes(static_cast<double>(r.payload.max)));
    absl::StrAppendFormat(&out, "image size    width %d-%d, height %d-%d\n", r.width.min,
                          r.width.max, r.height.min, r.height.max);
  }
  const bool images = !storage::IsTokenDataset(r.header);
  if (r.records_read && images) {
    absl::StrAppendFormat(
        &out,
        "stored        %d JPEG (%d segment-decodable: the loader reads only a crop's restart "
        "segments), %d raw pixels; %d shrunk by --max-side%s\n",
        r.jpeg_records, r.segmented, r.raw_records, r.shrunk,
        r.shards > 1 ? absl::StrFormat("; %d shards", r.shards) : "");
  }
  if (r.store.has_value())
    absl::StrAppendFormat(&out, "object store  %s\n", StoreCountersText(*r.store));
  if (images) absl::StrAppendFormat(&out, "classes       %d\n", r.header.classes.size());
  for (size_t c = 0; c < r.header.classes.size(); ++c) {
    if (r.records_read) {
      absl::StrAppendFormat(&out, "  %5d  %-24s %d\n", c, r.header.classes[c], r.class_counts[c]);
    } else {
      absl::StrAppendFormat(&out, "  %5d  %s\n", c, r.header.classes[c]);
    }
  }
  if (r.records_read) absl::StrAppendFormat(&out, "digest        %s\n", r.content_digest);
  if (r.verified) {
    absl::StrAppendFormat(&out, "verify        %s: %d bad record(s) of %d%s\n",
                          r.bad.empty() ? "OK" : "FAILED", r.bad.size(), r.completion.sample_count,
                          !images     ? " (checksums, and every id within the vocabulary)"
                          : r.decoded ? " (checksums, segment offsets and the loader's full decode)"
                                      : " (checksums and segment offsets)");
  }
  for (const auto& b : r.bad) {
    absl::StrAppendFormat(&out, "  bad record %d (key %s): %s\n", b.index, b.key, b.reason);
  }
  return out;
}

absl::StatusOr<storage::Record> ExtractRecord(const std::string& path, uint64_t index,
                                              const std::string& out_file,
                                              const storage::StoreOverrides& store) {
  storage::ReaderOptions ro;
  ro.store_overrides = store;
  DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(path, ro));
  DDPIO_ASSIGN_OR_RETURN(storage::Record record, reader->ReadCopy(index));
  const std::string tmp = out_file + ".tmp";
  absl::Status st;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
    // Raw pixels become a binary PPM, so every record comes out as an image file any tool opens.
    // A token record comes out as its ids, little-endian (numpy.fromfile(path, '<u2' or '<u4')).
    std::string bytes;
    if (storage::TokenWidth(record.type) != 0) {
      bytes.assign(record.payload.begin(), record.payload.end());
    } else {
      DDPIO_ASSIGN_OR_RETURN(bytes, storage::ImageFileBytes(record.view()));
    }
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) st = ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
  }
  std::error_code ec;
  if (st.ok()) {
    std::filesystem::rename(tmp, out_file, ec);
    if (ec) st = ErrnoToStatus(ec.value(), absl::StrCat("renaming ", tmp, " to ", out_file));
  }
  if (!st.ok()) {
    std::filesystem::remove(tmp, ec);  // nothing half-written is left behind
    return st;
  }
  return record;
}

}  // namespace ddpio::tools
