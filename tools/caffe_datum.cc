#include "tools/caffe_datum.h"

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/jpeg.h"

// Parsed by hand: the seven fields of one message are ~150 lines with every bound checked (and a
// fuzz target), against a protobuf dependency — library, protoc at build time, generated code —
// for the same result.
namespace ddpio::tools {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

class WireReader {
 public:
  explicit WireReader(absl::Span<const uint8_t> bytes) : b_(bytes) {}
  bool done() const { return at_ >= b_.size(); }

  absl::Status Varint(const std::string& what, uint64_t* out) {
    const size_t start = at_;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= b_.size()) return Bad(what, start, "truncated varint");
      const uint8_t byte = b_[at_++];
      if (shift == 63 && (byte & 0x7e) != 0) return Bad(what, start, "varint overflows 64 bits");
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *out = v;
        return absl::OkStatus();
      }
    }
    return Bad(what, start, "varint longer than 10 bytes");
  }

  absl::Status LengthDelimited(const std::string& what, absl::Span<const uint8_t>* out) {
    const size_t start = at_;
    uint64_t len = 0;
    DDPIO_RETURN_IF_ERROR(Varint(what, &len));
    if (len > b_.size() - at_) {
      return Bad(
          what, start,
          absl::StrCat("length ", len, " runs past the end (", b_.size() - at_, " bytes left)"));
    }
    *out = b_.subspan(at_, static_cast<size_t>(len));
    at_ += static_cast<size_t>(len);
    return absl::OkStatus();
  }

  absl::Status Fixed(const std::string& what, size_t n) {
    if (n > b_.size() - at_) return Bad(what, at_, "truncated fixed-size value");
    at_ += n;
    return absl::OkStatus();
  }

  absl::Status Skip(uint32_t field, uint32_t wire) {
    const std::string what = absl::StrCat("unknown field ", field);
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
      default:
        return Bad(what, at_,
                   absl::StrCat("wire type ", wire, " (groups are not part of a Datum)"));
    }
  }

  absl::Status Bad(const std::string& what, size_t at, const std::string& why) const {
    return absl::DataLossError(
        absl::StrCat("malformed Caffe Datum: ", what, " at byte ", at, ": ", why));
  }
  size_t at() const { return at_; }

 private:
  absl::Span<const uint8_t> b_;
  size_t at_ = 0;
};

// protobuf's int32: the low 32 bits of the varint, as two's complement.
int32_t AsInt32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

}  // namespace

absl::Status ParseCaffeDatum(absl::Span<const uint8_t> bytes, CaffeDatum* out) {
  *out = CaffeDatum();
  WireReader r(bytes);
  static const char* const kNames[] = {"",     "channels", "height",     "width",
                                       "data", "label",    "float_data", "encoded"};
  while (!r.done()) {
    const size_t tag_at = r.at();
    uint64_t tag = 0;
    DDPIO_RETURN_IF_ERROR(r.Varint("field tag", &tag));
    const uint64_t field = tag >> 3;
    const auto wire = static_cast<uint32_t>(tag & 7);
    if (field == 0 || field > 0x1fffffff)
      return r.Bad("field tag", tag_at, absl::StrCat("field number ", field));
    if (field > 7) {
      DDPIO_RETURN_IF_ERROR(r.Skip(static_cast<uint32_t>(field), wire));
      continue;
    }
    const std::string name = kNames[field];
    const auto expect = [&](uint32_t want) {
      return wire == want
                 ? absl::OkStatus()
                 : r.Bad(name, tag_at, absl::StrCat("wire type ", wire, ", expected ", want));
    };
    uint64_t v = 0;
    switch (field) {
      case 1:
      case 2:
      case 3:
      case 5:
      case 7:
        DDPIO_RETURN_IF_ERROR(expect(kVarint));
        DDPIO_RETURN_IF_ERROR(r.Varint(name, &v));
        if (field == 1) out->channels = AsInt32(v);
        if (field == 2) out->height = AsInt32(v);
        if (field == 3) out->width = AsInt32(v);
        if (field == 5) out->label = AsInt32(v);
        if (field == 7) out->encoded = v != 0;
        break;
      case 4:
        DDPIO_RETURN_IF_ERROR(expect(kLengthDelimited));
        DDPIO_RETURN_IF_ERROR(r.LengthDelimited(name, &out->data));
        break;
      case 6:
        if (wire == kFixed32) {  // unpacked: one float
          DDPIO_RETURN_IF_ERROR(r.Fixed(name, 4));
          ++out->float_data_count;
        } else {  // packed: a run of floats
          DDPIO_RETURN_IF_ERROR(expect(kLengthDelimited));
          absl::Span<const uint8_t> packed;
          DDPIO_RETURN_IF_ERROR(r.LengthDelimited(name, &packed));
          if (packed.size() % 4 != 0)
            return r.Bad(name, tag_at, absl::StrCat("packed floats of ", packed.size(), " bytes"));
          out->float_data_count += packed.size() / 4;
        }
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status CaffeDatumToRgb(const CaffeDatum& d, uint64_t max_pixels, std::vector<uint8_t>* rgb) {
  if (d.encoded) return absl::DataLossError("the Datum holds an encoded image, not raw pixels");
  if (d.data.empty() && d.float_data_count > 0) {
    return absl::DataLossError(
        absl::StrCat("the Datum holds ", d.float_data_count,
                     " float_data values instead of bytes (float Datums are not images "
                     "ddpio can store)"));
  }
  if (d.channels != 1 && d.channels != 3) {
    return absl::DataLossError(
        absl::StrCat("a raw Datum of ", d.channels, " channels (ddpio reads 1 or 3)"));
  }
  if (d.height <= 0 || d.width <= 0) {
    return absl::DataLossError(absl::StrCat("a raw Datum of ", d.width, "x", d.height, " pixels"));
  }
  DDPIO_RETURN_IF_ERROR(loader::CheckImagePixels(d.width, d.height, max_pixels));
  const uint64_t plane = static_cast<uint64_t>(d.width) * static_cast<uint64_t>(d.height);
  if (d.data.size() != plane * static_cast<uint64_t>(d.channels)) {
    return absl::DataLossError(absl::StrCat("a raw Datum's data of ", d.data.size(),
                                            " bytes is not ", d.channels, "x", d.height, "x",
                                            d.width, " = ", plane * d.channels));
  }
  rgb->resize(plane * 3);
  uint8_t* out = rgb->data();
  const uint8_t* in = d.data.data();
  for (uint64_t p = 0; p < plane; ++p) {
    if (d.channels == 1) {
      out[3 * p] = out[3 * p + 1] = out[3 * p + 2] = in[p];
    } else {  // planes B, G, R
      out[3 * p] = in[2 * plane + p];
      out[3 * p + 1] = in[plane + p];
      out[3 * p + 2] = in[p];
    }
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

// int32 fields are sign-extended to 64 bits on the wire, as protobuf does.
void PutInt32(uint32_t field, int32_t v, std::string* out) {
  PutVarint(field << 3 | kVarint, out);
  PutVarint(static_cast<uint64_t>(static_cast<int64_t>(v)), out);
}

}  // namespace

std::string EncodeCaffeDatum(int32_t channels, int32_t height, int32_t width, std::string_view data,
                             int32_t label, bool encoded) {
  std::string out;
  // proto2 optional fields: written when set; Caffe sets the geometry of raw Datums only.
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

}  // namespace ddpio::tools
