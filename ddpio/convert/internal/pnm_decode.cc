#include "ddpio/convert/internal/pnm_decode.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/internal/image_plan.h"
#include "ddpio/loader/jpeg.h"

namespace ddpio::convert::internal {
namespace {

class PnmReader {
 public:
  explicit PnmReader(absl::Span<const uint8_t> b) : b_(b) {}

  // PpmImageFile._read_token: whitespace ends a token; '#' skips to the end of the line and
  // the token continues after it; at most 10 characters.
  absl::StatusOr<uint64_t> Number(absl::string_view what) {
    std::string token;
    while (token.size() <= 10) {
      if (at_ >= b_.size()) break;
      const char c = static_cast<char>(b_[at_++]);
      if (IsSpace(c)) {
        if (token.empty()) continue;
        break;
      }
      if (c == '#') {
        while (at_ < b_.size() && b_[at_] != '\r' && b_[at_] != '\n') ++at_;
        if (at_ < b_.size()) ++at_;
        continue;
      }
      token += c;
    }
    if (token.empty() || token.size() > 10 ||
        !std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return absl::DataLossError(
          absl::StrCat("malformed PNM header: its ", what, " is not a number"));
    }
    return std::stoull(token);
  }

  static bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
  absl::Span<const uint8_t> rest() const { return b_.subspan(std::min(at_, b_.size())); }

 private:
  absl::Span<const uint8_t> b_;
  size_t at_ = 2;  // after the magic number
};

// round(v / maxval * out_max) in Python's float arithmetic (round half to even).
uint8_t PillowPnmValue(uint64_t v, uint64_t maxval, bool mode_i) {
  const double out_max = mode_i ? 65535 : 255;
  const double scaled =
      std::min(out_max, std::nearbyint(static_cast<double>(v) / maxval * out_max));
  return static_cast<uint8_t>(std::min(scaled, 255.0));  // mode "I": convert("RGB") clips
}

// The ASCII samples of P1, P2 and P3 as PpmPlainDecoder reads them: a comment runs from '#' to
// the end of its line, which it takes with it (so "12#x\n3" is 123); P1 samples are single
// characters, whitespace optional. Calls `visit(index, value)` for the first `count` samples.
template <typename Visit>
absl::Status ReadPlainSamples(absl::Span<const uint8_t> data, bool bits, size_t count,
                              Visit visit) {
  size_t n = 0;
  std::string token;
  const auto flush = [&]() -> absl::Status {
    if (token.empty() || n == count) return absl::OkStatus();
    if (!std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return absl::DataLossError(absl::StrCat("PNM sample \"", token, "\" is not a number"));
    }
    DDPIO_RETURN_IF_ERROR(visit(n++, std::stoull(token)));
    token.clear();
    return absl::OkStatus();
  };
  for (size_t i = 0; i < data.size() && n < count; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '#') {
      while (i + 1 < data.size() && data[i + 1] != '\r' && data[i + 1] != '\n') ++i;
      ++i;  // the end of the line goes with the comment
      continue;
    }
    if (PnmReader::IsSpace(c)) {
      DDPIO_RETURN_IF_ERROR(flush());
      continue;
    }
    if (bits) {
      if (c != '0' && c != '1') return absl::DataLossError("PBM sample that is not 0 or 1");
      DDPIO_RETURN_IF_ERROR(visit(n++, c == '1'));
      continue;
    }
    token += c;
    if (token.size() > 10) return absl::DataLossError("PNM sample of more than 10 digits");
  }
  DDPIO_RETURN_IF_ERROR(flush());
  if (n < count)
    return absl::DataLossError(absl::StrCat("truncated PNM: ", n, " of ", count, " samples"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodedImage> DecodePnm(absl::Span<const uint8_t> b, const ImageDecodeOptions& o) {
  const char kind = static_cast<char>(b[1]);
  const bool bitmap = kind == '1' || kind == '4', plain = kind <= '3';
  const bool color = kind == '3' || kind == '6';
  const char* name = bitmap ? "PBM" : color ? "PPM" : "PGM";
  if (b.size() < 3 || !PnmReader::IsSpace(static_cast<char>(b[2]))) {
    return absl::DataLossError(
        absl::StrCat("malformed ", name, ": no whitespace after its magic number"));
  }
  PnmReader reader(b);
  DDPIO_ASSIGN_OR_RETURN(const uint64_t width, reader.Number("width"));
  DDPIO_ASSIGN_OR_RETURN(const uint64_t height, reader.Number("height"));
  uint64_t maxval = 1;
  if (!bitmap) {
    DDPIO_ASSIGN_OR_RETURN(maxval, reader.Number("maxval"));
    if (maxval == 0 || maxval > 65535) {
      return absl::DataLossError(absl::StrCat(name, " with maxval ", maxval, " (1 to 65535)"));
    }
  }
  if (width == 0 || height == 0 || width > INT32_MAX || height > INT32_MAX) {
    return absl::DataLossError(absl::StrCat(name, " of ", width, "x", height, " pixels"));
  }
  DDPIO_RETURN_IF_ERROR(loader::CheckImagePixels(static_cast<int64_t>(width),
                                                 static_cast<int64_t>(height), o.max_pixels, name));
  DDPIO_RETURN_IF_ERROR(CheckBudget(name, width, height, 3, o));  // parsed straight into the result
  const bool mode_i = !color && !bitmap && maxval > 255;          // Pillow's mode "I"
  const size_t channels = color ? 3 : 1, count = width * height * channels;
  const size_t sample_bytes = maxval > 255 ? 2 : 1, row_bytes = (width + 7) / 8;
  // Enough bytes for every sample before allocating: a short file cannot claim the budget.
  absl::Span<const uint8_t> data = reader.rest();
  const uint64_t needed = plain    ? (bitmap ? count : 2 * count - 1)
                          : bitmap ? row_bytes * height
                                   : count * sample_bytes;
  if (data.size() < needed) {
    return absl::DataLossError(absl::StrCat("truncated ", name, ": ", data.size(),
                                            " bytes of samples, ", plain ? "at least " : "", needed,
                                            " needed"));
  }
  DecodedImage out;
  out.format = "PNM";
  out.width = static_cast<int>(width);
  out.height = static_cast<int>(height);
  out.rgb.resize(width * height * 3);
  const auto put = [&](size_t sample, uint8_t v) {
    if (color) {
      out.rgb[sample] = v;
    } else {
      std::fill_n(out.rgb.begin() + sample * 3, 3, v);
    }
  };
  if (plain) {
    DDPIO_RETURN_IF_ERROR(ReadPlainSamples(data, bitmap, count, [&](size_t i, uint64_t v) {
      if (v > maxval)
        return absl::DataLossError(absl::StrCat(name, " sample ", v, " above its maxval ", maxval));
      put(i, bitmap ? (v ? 0 : 255) : PillowPnmValue(v, maxval, mode_i));
      return absl::OkStatus();
    }));
  } else if (bitmap) {  // P4: rows of whole bytes, 1 = black
    for (size_t y = 0; y < height; ++y) {
      for (size_t x = 0; x < width; ++x) {
        const bool black = data[y * row_bytes + x / 8] >> (7 - x % 8) & 1;
        put(y * width + x, black ? 0 : 255);
      }
    }
  } else {  // P5, P6: 1 or 2 bytes (big-endian) a sample
    for (size_t i = 0; i < count; ++i) {
      const uint64_t v = sample_bytes == 2 ? DecodeBigEndian16(data.data() + 2 * i) : data[i];
      // maxval 255 and a PGM's 65535 are read raw (mode "L", "I;16B"); the rest scaled.
      if (maxval == 255) {
        put(i, static_cast<uint8_t>(v));
      } else if (maxval == 65535 && mode_i) {
        put(i, static_cast<uint8_t>(std::min<uint64_t>(v, 255)));
      } else {
        put(i, PillowPnmValue(v, maxval, mode_i));
      }
    }
  }
  if (mode_i)
    out.detail = "16-bit grayscale, clipped at 255 as Pillow's convert(\"RGB\") does";
  else if (maxval != 255 && !bitmap)
    out.detail = absl::StrCat("maxval ", maxval);
  return out;
}

}  // namespace ddpio::convert::internal
