#include "ddpio/storage/record.h"
#include "ddpio/common/enum_names.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/storage/checksum.h"

namespace ddpio::storage {
namespace {

// Little-endian field access; the format is little-endian whatever the host.
void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Get32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Field offsets (docs/FORMAT.md).
constexpr size_t kOffCrc = 0, kOffVersion = 4, kOffType = 5, kOffChannels = 6, kOffHeight = 8,
                 kOffWidth = 12, kOffLabel = 16, kOffNameLen = 20, kOffReserved = 22,
                 kOffPayloadLen = 24;
static_assert(kOffPayloadLen + 4 == kRecordHeaderSize);

bool KnownType(uint8_t t) {
  return t == static_cast<uint8_t>(ContentType::kJpeg) ||
         t == static_cast<uint8_t>(ContentType::kRawUint8);
}

}  // namespace

constexpr EnumName<ContentType> kContentTypes[] = {{ContentType::kJpeg, "jpeg"}, {ContentType::kRawUint8, "raw_uint8"}};

std::string ContentTypeName(ContentType type) { return NameOf(kContentTypes, type); }

Record Record::FromView(const RecordView& v) {
  Record r;
  r.label = v.label;
  r.type = v.type;
  r.channels = v.channels;
  r.height = v.height;
  r.width = v.width;
  r.source_name = std::string(v.source_name);
  r.payload.assign(v.payload.begin(), v.payload.end());
  return r;
}

RecordView Record::view() const {
  RecordView v;
  v.label = label;
  v.type = type;
  v.channels = channels;
  v.height = height;
  v.width = width;
  v.source_name = source_name;
  v.payload = absl::MakeConstSpan(payload);
  return v;
}

size_t EncodedRecordSize(const RecordView& record) {
  return kRecordHeaderSize + record.source_name.size() + record.payload.size();
}

absl::Status EncodeRecord(const RecordView& record, std::string* out) {
  if (record.source_name.size() > kMaxSourceNameSize) {
    return absl::InvalidArgumentError(absl::StrCat("source name of ", record.source_name.size(),
                                                   " bytes is longer than ", kMaxSourceNameSize));
  }
  if (record.payload.size() >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload of ", record.payload.size(), " bytes is 4 GiB or more"));
  }
  out->resize(EncodedRecordSize(record));
  auto* p = reinterpret_cast<uint8_t*>(out->data());
  p[kOffVersion] = kRecordLayoutVersion;
  p[kOffType] = static_cast<uint8_t>(record.type);
  Put16(p + kOffChannels, record.channels);
  Put32(p + kOffHeight, record.height);
  Put32(p + kOffWidth, record.width);
  Put32(p + kOffLabel, static_cast<uint32_t>(record.label));
  Put16(p + kOffNameLen, static_cast<uint16_t>(record.source_name.size()));
  Put16(p + kOffReserved, 0);
  Put32(p + kOffPayloadLen, static_cast<uint32_t>(record.payload.size()));
  std::memcpy(p + kRecordHeaderSize, record.source_name.data(), record.source_name.size());
  if (!record.payload.empty()) {
    std::memcpy(p + kRecordHeaderSize + record.source_name.size(), record.payload.data(),
                record.payload.size());
  }
  Put32(p + kOffCrc, Crc32c(p + kOffVersion, out->size() - kOffVersion));
  return absl::OkStatus();
}

absl::Status DecodeRecord(absl::Span<const uint8_t> bytes, bool verify_checksum,
                          RecordView* out) {
  if (bytes.size() < kRecordHeaderSize) {
    return absl::DataLossError(absl::StrCat("truncated record: ", bytes.size(),
                                            " bytes, shorter than the ", kRecordHeaderSize,
                                            "-byte header"));
  }
  const uint8_t* p = bytes.data();
  if (p[kOffVersion] != kRecordLayoutVersion) {
    return absl::DataLossError(
        absl::StrCat("unknown record layout version ", static_cast<int>(p[kOffVersion])));
  }
  if (!KnownType(p[kOffType])) {
    return absl::DataLossError(
        absl::StrCat("unknown content type ", static_cast<int>(p[kOffType])));
  }
  const size_t name_len = Get16(p + kOffNameLen);
  const size_t payload_len = Get32(p + kOffPayloadLen);
  const size_t expected = kRecordHeaderSize + name_len + payload_len;
  if (bytes.size() != expected) {
    return absl::DataLossError(absl::StrCat(
        bytes.size() < expected ? "truncated record: " : "record with trailing bytes: ",
        bytes.size(), " bytes stored, header says ", expected));
  }
  if (verify_checksum) {
    uint32_t stored = Get32(p + kOffCrc);
    uint32_t computed = Crc32c(p + kOffVersion, bytes.size() - kOffVersion);
    if (stored != computed) {
      return absl::DataLossError(absl::StrFormat(
          "checksum mismatch: stored crc32c %08x, computed %08x", stored, computed));
    }
  }
  out->type = static_cast<ContentType>(p[kOffType]);
  out->channels = Get16(p + kOffChannels);
  out->height = Get32(p + kOffHeight);
  out->width = Get32(p + kOffWidth);
  out->label = static_cast<int32_t>(Get32(p + kOffLabel));
  out->source_name =
      std::string_view(reinterpret_cast<const char*>(p + kRecordHeaderSize), name_len);
  out->payload = bytes.subspan(kRecordHeaderSize + name_len, payload_len);
  return absl::OkStatus();
}

}  // namespace ddpio::storage
