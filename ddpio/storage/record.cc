#include "ddpio/storage/record.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/storage/checksum.h"

namespace ddpio::storage {
namespace {

// Field offsets (docs/FORMAT.md).
constexpr size_t kOffCrc = 0, kOffVersion = 4, kOffType = 5, kOffChannels = 6, kOffHeight = 8,
                 kOffWidth = 12, kOffLabel = 16, kOffNameLen = 20, kOffReserved = 22,
                 kOffPayloadLen = 24;
constexpr size_t kOffExtensionLen = 28;  // layout 2
static_assert(kOffPayloadLen + 4 == kRecordHeaderSize);
static_assert(kOffExtensionLen + 4 == kRecordHeaderSizeExtended);

// Extension entries: tag (2 bytes), length (4 bytes), value.
constexpr size_t kEntryHeader = 6;
constexpr uint16_t kTagOriginalGeometry = 1;  // value: height (4), width (4)
constexpr uint16_t kTagSegmentOffsets = 2;    // value: 4 bytes per offset

size_t ExtensionSize(const RecordView& r) {
  return (r.original_width != 0 || r.original_height != 0 ? kEntryHeader + 8 : 0) +
         (r.segment_offsets.empty() ? 0 : kEntryHeader + r.segment_offsets.size());
}

void PutExtensions(const RecordView& r, uint8_t* p) {
  if (r.original_width != 0 || r.original_height != 0) {
    EncodeFixed16(p, kTagOriginalGeometry);
    EncodeFixed32(p + 2, 8);
    EncodeFixed32(p + kEntryHeader, r.original_height);
    EncodeFixed32(p + kEntryHeader + 4, r.original_width);
    p += kEntryHeader + 8;
  }
  if (!r.segment_offsets.empty()) {
    EncodeFixed16(p, kTagSegmentOffsets);
    EncodeFixed32(p + 2, static_cast<uint32_t>(r.segment_offsets.size()));
    std::memcpy(p + kEntryHeader, r.segment_offsets.data(), r.segment_offsets.size());
  }
}

bool KnownType(uint8_t t) {
  return t >= static_cast<uint8_t>(ContentType::kJpeg) &&
         t <= static_cast<uint8_t>(ContentType::kTokensUint32);
}

absl::Status DecodeExtensions(absl::Span<const uint8_t> ext, RecordView* out) {
  size_t at = 0;
  while (at < ext.size()) {
    if (ext.size() - at < kEntryHeader) {
      return absl::DataLossError(
          absl::StrCat("record extension area cut short at byte ", at, " of ", ext.size()));
    }
    const uint16_t tag = DecodeFixed16(ext.data() + at);
    const uint64_t len = DecodeFixed32(ext.data() + at + 2);
    if (len > ext.size() - at - kEntryHeader) {
      return absl::DataLossError(absl::StrCat("record extension ", tag, " of ", len,
                                              " bytes runs past the area's ", ext.size(),
                                              " bytes"));
    }
    const uint8_t* v = ext.data() + at + kEntryHeader;
    if (tag == kTagOriginalGeometry) {
      if (len != 8)
        return absl::DataLossError(
            absl::StrCat("original geometry extension of ", len, " bytes, not 8"));
      out->original_height = DecodeFixed32(v);
      out->original_width = DecodeFixed32(v + 4);
    } else if (tag == kTagSegmentOffsets) {
      if (len % 4 != 0)
        return absl::DataLossError(absl::StrCat("segment offsets extension of ", len, " bytes"));
      out->segment_offsets = ext.subspan(at + kEntryHeader, static_cast<size_t>(len));
    }
    at += kEntryHeader + len;
  }
  return absl::OkStatus();
}

}  // namespace

constexpr EnumName<ContentType> kContentTypes[] = {{ContentType::kJpeg, "jpeg"},
                                                   {ContentType::kRawUint8, "raw_uint8"},
                                                   {ContentType::kTokensUint16, "tokens_uint16"},
                                                   {ContentType::kTokensUint32, "tokens_uint32"}};

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
  r.original_height = v.original_height;
  r.original_width = v.original_width;
  r.segment_offsets.assign(v.segment_offsets.begin(), v.segment_offsets.end());
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
  v.original_height = original_height;
  v.original_width = original_width;
  v.segment_offsets = absl::MakeConstSpan(segment_offsets);
  return v;
}

absl::StatusOr<std::string> ImageFileBytes(const RecordView& r) {
  const char* payload = reinterpret_cast<const char*>(r.payload.data());
  if (r.type == ContentType::kJpeg) return std::string(payload, r.payload.size());
  if (r.channels != 1 && r.channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("a raw record of ", r.channels, " channels has no image file form"));
  }
  if (r.payload.size() != static_cast<uint64_t>(r.width) * r.height * r.channels) {
    return absl::InvalidArgumentError(absl::StrCat("raw record of ", r.payload.size(),
                                                   " bytes is not ", r.width, "x", r.height, "x",
                                                   r.channels));
  }
  std::string file =
      absl::StrCat(r.channels == 3 ? "P6\n" : "P5\n", r.width, " ", r.height, "\n255\n");
  file.append(payload, r.payload.size());
  return file;
}

size_t EncodedRecordSize(const RecordView& record, bool bound) {
  const size_t ext = ExtensionSize(record);
  return (ext > 0 || bound ? kRecordHeaderSizeExtended + ext : kRecordHeaderSize) +
         record.source_name.size() + record.payload.size();
}

namespace {

// The CRC32C a layout 3 record's checksum starts from.
uint32_t BindingCrc(const RecordBinding& b) {
  uint8_t bytes[16];
  EncodeFixed64(bytes, b.salt);
  EncodeFixed64(bytes + 8, b.key);
  return Crc32c(bytes, sizeof(bytes));
}

}  // namespace

uint8_t RecordLayoutOf(absl::Span<const uint8_t> bytes) {
  return bytes.size() > kOffVersion ? bytes[kOffVersion] : 0;
}

absl::Status EncodeRecord(const RecordView& record, std::string* out,
                          const RecordBinding* binding) {
  if (record.source_name.size() > kMaxSourceNameSize) {
    return absl::InvalidArgumentError(absl::StrCat("source name of ", record.source_name.size(),
                                                   " bytes is longer than ", kMaxSourceNameSize));
  }
  if (record.payload.size() >= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload of ", record.payload.size(), " bytes is 4 GiB or more"));
  }
  if (const int width = TokenWidth(record.type); width > 0 && record.payload.size() % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("token payload of ", record.payload.size(),
                                                   " bytes is not a whole number of ", width,
                                                   "-byte ids"));
  }
  const bool bound = binding != nullptr;
  out->resize(EncodedRecordSize(record, bound));
  auto* p = reinterpret_cast<uint8_t*>(out->data());
  const size_t ext = ExtensionSize(record);
  const bool extended = ext > 0 || bound;
  const size_t header = extended ? kRecordHeaderSizeExtended : kRecordHeaderSize;
  p[kOffVersion] = bound     ? kRecordLayoutVersionBound
                   : ext > 0 ? kRecordLayoutVersionExtended
                             : kRecordLayoutVersion;
  p[kOffType] = static_cast<uint8_t>(record.type);
  EncodeFixed16(p + kOffChannels, record.channels);
  EncodeFixed32(p + kOffHeight, record.height);
  EncodeFixed32(p + kOffWidth, record.width);
  EncodeFixed32(p + kOffLabel, static_cast<uint32_t>(record.label));
  EncodeFixed16(p + kOffNameLen, static_cast<uint16_t>(record.source_name.size()));
  EncodeFixed16(p + kOffReserved, 0);
  EncodeFixed32(p + kOffPayloadLen, static_cast<uint32_t>(record.payload.size()));
  if (extended) EncodeFixed32(p + kOffExtensionLen, static_cast<uint32_t>(ext));
  if (!record.source_name.empty()) {  // an empty view's data() may be null
    std::memcpy(p + header, record.source_name.data(), record.source_name.size());
  }
  PutExtensions(record, p + header + record.source_name.size());
  if (!record.payload.empty()) {
    std::memcpy(p + header + record.source_name.size() + ext, record.payload.data(),
                record.payload.size());
  }
  EncodeFixed32(p + kOffCrc, Crc32c(p + kOffVersion, out->size() - kOffVersion,
                                    bound ? BindingCrc(*binding) : 0));
  return absl::OkStatus();
}

absl::Status DecodeRecord(absl::Span<const uint8_t> bytes, bool verify_checksum, RecordView* out,
                          const RecordBinding* binding) {
  if (bytes.size() < kRecordHeaderSize) {
    return absl::DataLossError(absl::StrCat("truncated record: ", bytes.size(),
                                            " bytes, shorter than the ", kRecordHeaderSize,
                                            "-byte header"));
  }
  const uint8_t* p = bytes.data();
  const uint8_t layout = p[kOffVersion];
  const bool bound = layout == kRecordLayoutVersionBound;
  const bool extended = layout == kRecordLayoutVersionExtended || bound;
  if (layout != kRecordLayoutVersion && !extended) {
    return absl::DataLossError(
        absl::StrCat("unknown record layout version ", static_cast<int>(layout)));
  }
  if (!bound && binding != nullptr && binding->required) {
    return absl::DataLossError(
        absl::StrCat("a record of layout ", static_cast<int>(layout),
                     " (not bound to its key) in a dataset whose records are bound: a record from "
                     "another dataset was put here"));
  }
  if (extended && bytes.size() < kRecordHeaderSizeExtended) {
    return absl::DataLossError(absl::StrCat("truncated record: ", bytes.size(),
                                            " bytes, shorter than the ", kRecordHeaderSizeExtended,
                                            "-byte header of layout ", static_cast<int>(layout)));
  }
  const size_t header = extended ? kRecordHeaderSizeExtended : kRecordHeaderSize;
  const size_t ext_len = extended ? DecodeFixed32(p + kOffExtensionLen) : 0;
  if (!KnownType(p[kOffType])) {
    return absl::DataLossError(
        absl::StrCat("unknown content type ", static_cast<int>(p[kOffType])));
  }
  const size_t name_len = DecodeFixed16(p + kOffNameLen);
  const size_t payload_len = DecodeFixed32(p + kOffPayloadLen);
  const uint64_t expected = uint64_t{header} + name_len + ext_len + payload_len;
  if (bytes.size() != expected) {
    return absl::DataLossError(absl::StrCat(
        bytes.size() < expected ? "truncated record: " : "record with trailing bytes: ",
        bytes.size(), " bytes stored, header says ", expected));
  }
  if (const int width = TokenWidth(static_cast<ContentType>(p[kOffType]));
      width > 0 && payload_len % width != 0) {
    return absl::DataLossError(absl::StrCat("token record of ", payload_len,
                                            " payload bytes, not a whole number of ", width,
                                            "-byte ids"));
  }
  if (verify_checksum) {
    if (bound && binding == nullptr) {
      return absl::FailedPreconditionError("a bound record (layout 3) checked without its binding");
    }
    const uint32_t stored = DecodeFixed32(p + kOffCrc);
    const uint32_t computed =
        Crc32c(p + kOffVersion, bytes.size() - kOffVersion, bound ? BindingCrc(*binding) : 0);
    if (stored != computed) {
      if (bound && Crc32c(p + kOffVersion, bytes.size() - kOffVersion, 0) == stored) {
        return absl::DataLossError(
            "checksum mismatch: the record was checksummed without a binding");
      }
      if (bound) {
        return absl::DataLossError(absl::StrFormat(
            "checksum mismatch: stored crc32c %08x, computed %08x for key %d of this dataset: the "
            "record is damaged, "
            "or is another key's or another dataset's record (moved, swapped or copied here)",
            stored, computed, binding->key));
      }
      return absl::DataLossError(absl::StrFormat(
          "checksum mismatch: stored crc32c %08x, computed %08x", stored, computed));
    }
  }
  out->type = static_cast<ContentType>(p[kOffType]);
  out->channels = DecodeFixed16(p + kOffChannels);
  out->height = DecodeFixed32(p + kOffHeight);
  out->width = DecodeFixed32(p + kOffWidth);
  out->label = static_cast<int32_t>(DecodeFixed32(p + kOffLabel));
  out->source_name = std::string_view(reinterpret_cast<const char*>(p + header), name_len);
  out->payload = bytes.subspan(header + name_len + ext_len, payload_len);
  out->original_height = 0;
  out->original_width = 0;
  out->segment_offsets = {};
  return DecodeExtensions(bytes.subspan(header + name_len, ext_len), out);
}

}  // namespace ddpio::storage
