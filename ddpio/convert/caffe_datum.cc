#include "ddpio/convert/caffe_datum.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

// Parsed by hand, not with protobuf: a Datum has seven scalar fields, and a reader for them with
// every bound checked is ~150 lines (and a fuzz target), against a protobuf dependency — the
// library, protoc at build time, generated code — for the same result. The rules followed are
// protobuf's own (https://protobuf.dev/programming-guides/encoding/): varints of at most 10
// bytes; int32 values are the low 32 bits of the varint (negative ones are written sign-extended
// to 64 bits, 10 bytes); the last value of a repeated scalar field wins; unknown fields are
// skipped by wire type.
namespace ddpio::convert {
namespace {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

constexpr uint64_t kMaxFieldNumber = (uint64_t{1} << 29) - 1;

// Reads protobuf wire values from `bytes` front to back. Every failure is a DataLoss naming what
// was being read and the byte offset where it starts; nothing reads past the end.
class WireReader {
 public:
  // `bytes` must outlive the reader and any span it returns.
  explicit WireReader(absl::Span<const uint8_t> bytes) : b_(bytes) {}

  bool done() const { return at_ >= b_.size(); }
  size_t at() const { return at_; }

  // A varint of at most 10 bytes whose value fits in 64 bits.
  absl::Status Varint(const std::string& what, uint64_t* out) {
    const size_t start = at_;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= b_.size()) return Bad(what, start, "truncated varint");
      const uint8_t byte = b_[at_++];
      // The 10th byte holds bit 63 alone; anything more would be lost (or continue the varint).
      if (shift == 63 && byte > 1) return Bad(what, start, "varint longer than 10 bytes");
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *out = v;
        return absl::OkStatus();
      }
    }
    return Bad(what, start, "varint longer than 10 bytes");  // not reached: caught above
  }

  // A varint length, then that many bytes (a view into the reader's bytes).
  absl::Status LengthDelimited(const std::string& what, absl::Span<const uint8_t>* out) {
    const size_t start = at_;
    uint64_t len = 0;
    DDPIO_RETURN_IF_ERROR(Varint(what, &len));
    const size_t left = b_.size() - at_;  // at_ <= size(): no underflow, and no len + at_ overflow
    if (len > left) {
      return Bad(what, start,
                 absl::StrCat("length ", len, " runs past the end (", left, " bytes left)"));
    }
    *out = b_.subspan(at_, static_cast<size_t>(len));
    at_ += static_cast<size_t>(len);
    return absl::OkStatus();
  }

  // Steps over `n` bytes of a fixed-size value.
  absl::Status Fixed(const std::string& what, size_t n) {
    if (n > b_.size() - at_) {
      return Bad(what, at_,
                 absl::StrCat("truncated ", n, "-byte value (", b_.size() - at_, " bytes left)"));
    }
    at_ += n;
    return absl::OkStatus();
  }

  // Steps over the value of a field this parser does not know.
  absl::Status Skip(const std::string& what, uint32_t wire, size_t tag_at) {
    absl::Span<const uint8_t> ignored;
    uint64_t v = 0;
    switch (wire) {
      case kVarint:
        return Varint(what, &v);
      case kFixed64:
        return Fixed(what, 8);
      case kLengthDelimited:
        return LengthDelimited(what, &ignored);
      case kFixed32:
        return Fixed(what, 4);
      case kStartGroup:
      case kEndGroup:
        return Bad(what, tag_at, absl::StrCat("wire type ", wire, " (a group; a Datum has none)"));
      default:
        return Bad(what, tag_at, absl::StrCat("wire type ", wire, " does not exist"));
    }
  }

  static absl::Status Bad(const std::string& what, size_t at, const std::string& why) {
    return absl::DataLossError(
        absl::StrCat("malformed Caffe Datum: ", what, " at byte ", at, ": ", why));
  }

 private:
  absl::Span<const uint8_t> b_;
  size_t at_ = 0;
};

const char* FieldName(uint64_t field) {
  static const char* const kNames[] = {"",     "channels", "height",     "width",
                                       "data", "label",    "float_data", "encoded"};
  return field < 8 ? kNames[field] : "";
}

// protobuf's int32: the low 32 bits of the varint, as two's complement.
int32_t AsInt32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// float_data, either packed (one length-delimited run) or not (one fixed32 per value).
absl::Status ReadFloatData(WireReader& r, uint32_t wire, size_t tag_at, CaffeDatum* out) {
  if (wire == kFixed32) {
    DDPIO_RETURN_IF_ERROR(r.Fixed("float_data", 4));
    ++out->float_data_count;
    return absl::OkStatus();
  }
  absl::Span<const uint8_t> packed;
  DDPIO_RETURN_IF_ERROR(r.LengthDelimited("float_data", &packed));
  if (packed.size() % 4 != 0) {
    return WireReader::Bad(
        "float_data", tag_at,
        absl::StrCat("packed floats of ", packed.size(), " bytes, not a multiple of 4"));
  }
  out->float_data_count += packed.size() / 4;
  return absl::OkStatus();
}

// The value of field 1..7, whose tag (at `tag_at`) has wire type `wire`.
absl::Status ReadKnownField(WireReader& r, uint64_t field, uint32_t wire, size_t tag_at,
                            CaffeDatum* out) {
  const std::string name = FieldName(field);
  const uint32_t want = field == 4 ? kLengthDelimited : kVarint;
  if (field == 6 ? (wire != kFixed32 && wire != kLengthDelimited) : wire != want) {
    return WireReader::Bad(name, tag_at,
                           absl::StrCat("wire type ", wire, ", expected ",
                                        field == 6 ? "5 or 2" : std::to_string(want)));
  }
  if (field == 4) return r.LengthDelimited(name, &out->data);  // the last one wins
  if (field == 6) return ReadFloatData(r, wire, tag_at, out);
  uint64_t v = 0;
  DDPIO_RETURN_IF_ERROR(r.Varint(name, &v));
  switch (field) {  // the last value wins
    case 1:
      out->channels = AsInt32(v);
      break;
    case 2:
      out->height = AsInt32(v);
      break;
    case 3:
      out->width = AsInt32(v);
      break;
    case 5:
      out->label = AsInt32(v);
      break;
    case 7:
      out->encoded = v != 0;
      break;
  }
  return absl::OkStatus();
}

// DataLoss unless the pixel count is within `max_pixels`; sizes are positive int32s, so
// the product (< 2^62) cannot overflow.
absl::Status CheckGeometry(const CaffeDatum& d, uint64_t max_pixels) {
  if (d.channels != 1 && d.channels != 3) {
    return absl::DataLossError(
        absl::StrCat("a raw Caffe Datum of ", d.channels, " channels (ddpio reads 1 or 3)"));
  }
  if (d.height <= 0 || d.width <= 0) {
    return absl::DataLossError(
        absl::StrCat("a raw Caffe Datum of ", d.width, "x", d.height, " pixels"));
  }
  const uint64_t pixels = static_cast<uint64_t>(d.width) * static_cast<uint64_t>(d.height);
  if (pixels > max_pixels) {
    return absl::DataLossError(absl::StrCat("a raw Caffe Datum declares ", d.width, "x", d.height,
                                            " = ", pixels, " pixels, more than the limit of ",
                                            max_pixels));
  }
  // pixels * 3 < 3 * 2^62 < 2^64.
  const uint64_t want = pixels * static_cast<uint64_t>(d.channels);
  if (d.data.size() != want) {
    return absl::DataLossError(absl::StrCat("a raw Caffe Datum's data of ", d.data.size(),
                                            " bytes is not ", d.channels, "x", d.height, "x",
                                            d.width, " = ", want));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseCaffeDatum(absl::Span<const uint8_t> bytes, CaffeDatum* out) {
  *out = CaffeDatum();
  WireReader r(bytes);
  while (!r.done()) {
    const size_t tag_at = r.at();
    uint64_t tag = 0;
    DDPIO_RETURN_IF_ERROR(r.Varint("field tag", &tag));
    const uint64_t field = tag >> 3;
    const auto wire = static_cast<uint32_t>(tag & 7);
    if (field == 0 || field > kMaxFieldNumber) {
      return WireReader::Bad("field tag", tag_at, absl::StrCat("field number ", field));
    }
    if (field <= 7) {
      DDPIO_RETURN_IF_ERROR(ReadKnownField(r, field, wire, tag_at, out));
    } else {
      DDPIO_RETURN_IF_ERROR(r.Skip(absl::StrCat("unknown field ", field), wire, tag_at));
    }
  }
  return absl::OkStatus();
}

absl::Status CaffeDatumToRgb(const CaffeDatum& d, uint64_t max_pixels, std::vector<uint8_t>* rgb) {
  if (d.encoded) {
    return absl::DataLossError("the Caffe Datum holds an encoded image file, not raw pixels");
  }
  if (d.data.empty() && d.float_data_count > 0) {
    return absl::DataLossError(absl::StrCat(
        "the Caffe Datum holds ", d.float_data_count,
        " float_data values instead of bytes (float Datums are not images ddpio can store)"));
  }
  DDPIO_RETURN_IF_ERROR(CheckGeometry(d, max_pixels));
  const size_t plane = static_cast<size_t>(d.width) * static_cast<size_t>(d.height);
  rgb->resize(plane * 3);
  uint8_t* out = rgb->data();
  const uint8_t* in = d.data.data();
  if (d.channels == 1) {
    for (size_t p = 0; p < plane; ++p) out[3 * p] = out[3 * p + 1] = out[3 * p + 2] = in[p];
    return absl::OkStatus();
  }
  const uint8_t* blue = in;
  const uint8_t* green = in + plane;
  const uint8_t* red = in + 2 * plane;
  for (size_t p = 0; p < plane; ++p) {
    out[3 * p] = red[p];
    out[3 * p + 1] = green[p];
    out[3 * p + 2] = blue[p];
  }
  return absl::OkStatus();
}

namespace {

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// int32 values are sign-extended to 64 bits on the wire, as protobuf does.
void PutInt32(uint32_t field, int32_t v, std::string* out) {
  PutVarint(field << 3 | kVarint, out);
  PutVarint(static_cast<uint64_t>(static_cast<int64_t>(v)), out);
}

}  // namespace

std::string EncodeCaffeDatum(int32_t channels, int32_t height, int32_t width, std::string_view data,
                             int32_t label, bool encoded) {
  std::string out;
  // proto2 optional fields are written when set; Caffe sets the geometry of raw Datums only.
  if (channels != 0) PutInt32(1, channels, &out);
  if (height != 0) PutInt32(2, height, &out);
  if (width != 0) PutInt32(3, width, &out);
  PutVarint(4 << 3 | kLengthDelimited, &out);
  PutVarint(data.size(), &out);
  out.append(data);
  PutInt32(5, label, &out);
  if (encoded) {
    PutVarint(7 << 3 | kVarint, &out);
    PutVarint(1, &out);
  }
  return out;
}

}  // namespace ddpio::convert
