#include "ddpio/storage/remote/remote_format.h"

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/internal/json_parse.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/checksum.h"
#include "ddpio/storage/internal/json_fields.h"
#include "ddpio/storage/record.h"

namespace ddpio::storage::remote {
namespace {

constexpr char kIndexMagic[] = "DDPIDX01";
constexpr char kIndexMagicWithLengths[] = "DDPIDX02";  // and the records' document lengths
constexpr size_t kMagicBytes = 8;
constexpr size_t kEntryBytes = 16;
constexpr size_t kLengthBytes = 4;
constexpr size_t kIndexOverhead = kMagicBytes + 8 + 4;  // magic, count, trailing CRC32C

}  // namespace

uint64_t RecordIndexBytes(uint64_t records, bool document_lengths) {
  return kIndexOverhead + records * (kEntryBytes + (document_lengths ? kLengthBytes : 0));
}

std::string EncodeRecordIndex(absl::Span<const RecordLocation> index,
                              absl::Span<const uint32_t> document_lengths) {
  const bool lengths = !document_lengths.empty();
  std::string out(lengths ? kIndexMagicWithLengths : kIndexMagic, kMagicBytes);
  out.reserve(RecordIndexBytes(index.size(), lengths));
  PutFixed64(&out, index.size());
  for (const RecordLocation& r : index) {
    PutFixed32(&out, r.file);
    PutFixed32(&out, r.length);
    PutFixed64(&out, r.offset);
  }
  for (uint32_t n : document_lengths) PutFixed32(&out, n);
  PutFixed32(&out, Crc32c(out.data(), out.size()));
  return out;
}

uint32_t RecordIndexChecksum(std::string_view index_bytes) {
  return index_bytes.size() < 4 ? 0 : DecodeFixed32(index_bytes.data() + index_bytes.size() - 4);
}

void RecordsDigest::Add(absl::Span<const uint8_t> stored) {
  char entry[8];
  EncodeFixed32(entry, static_cast<uint32_t>(stored.size()));
  for (int k = 0; k < 4; ++k) entry[4 + k] = k < static_cast<int>(stored.size()) ? stored[k] : 0;
  h_ = Fnv1a64Bytes(entry, sizeof(entry), h_);
}

bool RemoteManifest::MatchesIndex(std::string_view index_bytes) const {
  if (index_bytes.size() != this->index_bytes) return false;
  if (!identifies_records()) return Crc32c(index_bytes.data(), index_bytes.size()) == index_crc32c;
  // That the checksum is the index's own is DecodeRecordIndex's to check (it reads every byte).
  return RecordIndexChecksum(index_bytes) == index_crc32c;
}

std::string RemoteManifest::ContentName(uint32_t index_checksum) const {
  std::string identity = EncodeHeader(header);
  absl::StrAppend(&identity, "\n", EncodeCompletion(completion), "\n", index_checksum, "\n",
                  records_digest);
  return absl::StrCat(header.id.empty() ? "dataset" : header.id, "-",
                      absl::Hex(Fnv1a64(identity), absl::kZeroPad16));
}

absl::StatusOr<RecordIndex> DecodeRecordIndex(std::string_view bytes, uint64_t records,
                                              absl::Span<const uint64_t> file_bytes,
                                              bool document_lengths, const std::string& what) {
  const std::string_view magic(document_lengths ? kIndexMagicWithLengths : kIndexMagic,
                               kMagicBytes);
  if (bytes.size() < kIndexOverhead || bytes.substr(0, kMagicBytes) != magic) {
    const bool other =
        bytes.size() >= kIndexOverhead &&
        bytes.substr(0, kMagicBytes) ==
            std::string_view(document_lengths ? kIndexMagic : kIndexMagicWithLengths, kMagicBytes);
    if (other) {
      return absl::DataLossError(absl::StrCat(
          what, document_lengths ? " carries no document lengths; its manifest says it does"
                                 : " carries document lengths; its manifest says it does not"));
    }
    return absl::DataLossError(
        absl::StrCat(what, " is not a ddpio record index (", bytes.size(), " bytes)"));
  }
  const uint64_t count = DecodeFixed64(bytes.data() + kMagicBytes);
  if (count != records || count > kMaxRemoteRecords ||
      bytes.size() != RecordIndexBytes(count, document_lengths)) {
    return absl::DataLossError(absl::StrCat(what, " lists ", count, " records in ", bytes.size(),
                                            " bytes; the manifest says ", records));
  }
  const uint32_t stored = DecodeFixed32(bytes.data() + bytes.size() - 4);
  const uint32_t actual = Crc32c(bytes.data(), bytes.size() - 4);
  if (stored != actual) {
    return absl::DataLossError(absl::StrCat(what, " is damaged: its checksum is ", actual,
                                            ", not the ", stored, " it was written with"));
  }
  RecordIndex decoded;
  std::vector<RecordLocation>& index = decoded.locations;
  index.resize(count);
  const char* p = bytes.data() + kMagicBytes + 8;
  for (uint64_t i = 0; i < count; ++i, p += kEntryBytes) {
    RecordLocation& r = index[i];
    r.file = DecodeFixed32(p);
    r.length = DecodeFixed32(p + 4);
    r.offset = DecodeFixed64(p + 8);
    if (r.file >= file_bytes.size() || r.length == 0 || r.offset > file_bytes[r.file] ||
        r.length > file_bytes[r.file] - r.offset) {
      return absl::DataLossError(absl::StrCat(what, ": record ", i, " (file ", r.file, ", bytes ",
                                              r.offset, "+", r.length,
                                              ") lies outside the dataset's files"));
    }
  }
  if (document_lengths) {
    decoded.document_lengths.resize(count);
    for (uint64_t i = 0; i < count; ++i, p += kLengthBytes) {
      decoded.document_lengths[i] = DecodeFixed32(p);
    }
  }
  return decoded;
}

absl::Status CheckDocumentLengths(const RecordIndex& index, const DatasetHeader& header,
                                  const DatasetCompletion& completion, const std::string& what) {
  const std::vector<uint32_t>& lengths = index.document_lengths;
  if (lengths.empty()) return absl::OkStatus();
  const uint64_t width = static_cast<uint64_t>(header.tokens.width);
  if (width == 0) {
    return absl::DataLossError(
        absl::StrCat(what, " carries document lengths, but its dataset is not a token dataset"));
  }
  if (lengths.size() != index.locations.size()) {  // DecodeRecordIndex never gives this
    return absl::DataLossError(absl::StrCat(what, " carries ", lengths.size(),
                                            " document lengths for ", index.locations.size(),
                                            " records"));
  }
  uint64_t ids = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const uint64_t stored = index.locations[i].length;
    const uint64_t room = stored > kRecordHeaderSize ? stored - kRecordHeaderSize : 0;
    if (lengths[i] * width > room) {
      return absl::DataLossError(absl::StrCat(what, ": document ", i, " is said to hold ",
                                              lengths[i], " ids, more than its record of ", stored,
                                              " bytes holds"));
    }
    ids += lengths[i];
  }
  if (ids * width != completion.payload_bytes) {
    return absl::DataLossError(absl::StrCat(what, ": the document lengths add up to ", ids,
                                            " ids, but the records hold ", completion.payload_bytes,
                                            " bytes of ", width, "-byte ids"));
  }
  return absl::OkStatus();
}

std::string EncodeRemoteManifest(const RemoteManifest& m) {
  nlohmann::json j;
  j["format"] = "ddpio-remote";
  j["version"] = m.version;
  j["header"] = nlohmann::json::parse(EncodeHeader(m.header));
  j["completion"] = nlohmann::json::parse(EncodeCompletion(m.completion));
  j["files"] = nlohmann::json::array();
  for (const RemoteFile& f : m.files) {
    j["files"].push_back({{"object", f.object},
                          {"bytes", f.bytes},
                          {"first", f.first},
                          {"records", f.records},
                          {"salt", f.salt},
                          {"bound", f.bound}});
    if (m.version >= 3) j["files"].back()["key_first"] = f.key_first;
  }
  j["index"] = {
      {"object", kRecordIndexObject}, {"bytes", m.index_bytes}, {"crc32c", m.index_crc32c}};
  if (m.version >= kRemoteManifestVersionOfLengths) {
    j["index"]["document_lengths"] = m.document_lengths;
  }
  if (m.identifies_records()) {
    j["records_digest"] = absl::StrCat(absl::Hex(m.records_digest, absl::kZeroPad16));
  }
  j["uploaded_by"] = m.uploaded_by;
  return j.dump(1);
}

absl::StatusOr<RemoteManifest> DecodeRemoteManifest(std::string_view text,
                                                    const std::string& what) {
  DDPIO_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJson(text, what, kMaxRemoteManifestBytes));
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(what, " is not a valid ddpio remote manifest: ", why));
  };
  auto text_of = [&](const nlohmann::json& o, const char* key) -> std::string {
    return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>()
                                                                  : std::string();
  };
  if (text_of(j, "format") != "ddpio-remote") return bad("no \"format\": \"ddpio-remote\"");
  RemoteManifest m;
  if (!internal::GetInt(j, "version", &m.version)) return bad("no version");
  if (m.version > kRemoteManifestVersion) {
    return absl::FailedPreconditionError(absl::StrCat(what, " is version ", m.version,
                                                      "; this ddpio reads up to ",
                                                      kRemoteManifestVersion, ": upgrade ddpio"));
  }
  if (!j.contains("header") || !j["header"].is_object()) return bad("no header");
  auto header = DecodeHeader(j["header"].dump());
  if (!header.ok()) return Annotate(header.status(), what);
  m.header = *std::move(header);
  if (!j.contains("completion") || !j["completion"].is_object()) return bad("no completion");
  auto completion = DecodeCompletion(j["completion"].dump());
  if (!completion.ok()) return Annotate(completion.status(), what);
  m.completion = *completion;
  if (!j.contains("files") || !j["files"].is_array() || j["files"].empty()) return bad("no files");
  uint64_t next = 0;
  for (const nlohmann::json& f : j["files"]) {
    RemoteFile file;
    file.object = text_of(f, "object");
    if (file.object.empty() || file.object.find("..") != std::string::npos ||
        file.object[0] == '/') {
      return bad(absl::StrCat("file object \"", file.object.substr(0, 100),
                              "\" is not inside the prefix"));
    }
    if (!internal::GetU64(f, "bytes", &file.bytes) || !internal::GetU64(f, "first", &file.first) ||
        !internal::GetU64(f, "records", &file.records) ||
        !internal::GetU64(f, "salt", &file.salt) || !f.contains("bound") ||
        !f["bound"].is_boolean()) {
      return bad(absl::StrCat("file ", file.object, " lacks bytes, first, records, salt or bound"));
    }
    file.bound = f["bound"].get<bool>();
    if (m.version >= 3) {
      // Chunk objects: each one's keys continue the previous one's, or start a new LMDB file (or
      // shard) at 0 — so that an index and manifest cannot shift a record's key with its place.
      if (!internal::GetU64(f, "key_first", &file.key_first)) {
        return bad(absl::StrCat("file ", file.object, " has no key_first (a count)"));
      }
      const bool continues = !m.files.empty() &&
                             file.key_first == m.files.back().key_first + m.files.back().records &&
                             file.salt == m.files.back().salt;
      if (file.key_first != 0 && !continues) {
        return bad(absl::StrCat("file ", file.object, "'s records start at key ", file.key_first,
                                ", which neither starts a file (0) nor continues the one before"));
      }
    }
    if (file.first != next || file.records > kMaxRemoteRecords) {
      return bad(
          absl::StrCat("file ", file.object, " starts at record ", file.first, ", not ", next));
    }
    next += file.records;
    if (next > kMaxRemoteRecords) {
      return bad(absl::StrCat("its files hold more than ", kMaxRemoteRecords,
                              " records, the most a remote dataset may hold"));
    }
    m.files.push_back(std::move(file));
  }
  if (next != m.completion.sample_count) {
    return bad(absl::StrCat("its files hold ", next, " records; its completion marker says ",
                            m.completion.sample_count));
  }
  const nlohmann::json& index = j.contains("index") ? j["index"] : nlohmann::json();
  uint64_t crc = 0;
  if (!internal::GetU64(index, "bytes", &m.index_bytes) ||
      !internal::GetU64(index, "crc32c", &crc) || crc > UINT32_MAX) {
    return bad("no index size or checksum");
  }
  m.index_crc32c = static_cast<uint32_t>(crc);
  if (m.version >= kRemoteManifestVersionOfLengths) {
    if (!index.contains("document_lengths") || !index["document_lengths"].is_boolean()) {
      return bad("no index document_lengths (true or false)");
    }
    m.document_lengths = index["document_lengths"].get<bool>();
    if (m.document_lengths && !IsTokenDataset(m.header)) {
      return bad("its index is said to carry document lengths, but it is not a token dataset");
    }
  }
  if (m.index_bytes != RecordIndexBytes(next, m.document_lengths)) {
    return bad(
        absl::StrCat("an index of ", m.index_bytes, " bytes cannot hold ", next, " records"));
  }
  if (m.identifies_records()) {
    const std::string digest = text_of(j, "records_digest");
    if (digest.size() != 16 || digest.find_first_not_of("0123456789abcdef") != std::string::npos ||
        !absl::SimpleHexAtoi(digest, &m.records_digest)) {
      return bad("no records_digest (16 hex digits)");
    }
  }
  m.uploaded_by = text_of(j, "uploaded_by");
  return m;
}

}  // namespace ddpio::storage::remote
