#include "ddpio/convert/npy_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::convert {
namespace {

// numpy's own limit (NPY_MAXDIMS in numpy 1.x); it also bounds what a shape allocates.
constexpr size_t kMaxDimensions = 32;
constexpr size_t kMagicAndVersionBytes = sizeof(kNpyMagic) + 2;

absl::Status Damaged(absl::string_view what) {
  return absl::DataLossError(absl::StrCat(".npy header: ", what));
}

// Text from the file, quoted and escaped for a message, at most 40 bytes of it.
std::string Quoted(absl::string_view text) {
  const bool cut = text.size() > 40;
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, 40)), cut ? "...'" : "'");
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), shape.size() == 1 ? ",)" : ")");
}

// A cursor over the header's text that reads the dict literal numpy's format.py writes, with
// Python's literal syntax where numpy relies on it (either quote, a trailing comma, whitespace,
// a one-element tuple's comma) and nothing else: no escapes, no expressions, no other keys.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  // Fills info's descr, fortran_order and shape, or says where the text goes wrong.
  absl::Status Parse(NpyArrayInfo* info) {
    SkipSpace();
    if (!Consume('{')) return Malformed("it is not a Python dict literal (no '{')");
    bool seen[3] = {false, false, false};
    SkipSpace();
    while (!Consume('}')) {
      DDPIO_ASSIGN_OR_RETURN(absl::string_view key, String("a key"));
      const int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (k < 0) {
        return Damaged(absl::StrCat("unknown key ", Quoted(key),
                                    " (numpy writes 'descr', 'fortran_order' and 'shape')"));
      }
      if (seen[k]) return Damaged(absl::StrCat("key ", Quoted(key), " is given twice"));
      seen[k] = true;
      SkipSpace();
      if (!Consume(':')) return Malformed(absl::StrCat("no ':' after key ", Quoted(key)));
      SkipSpace();
      if (k == 0) DDPIO_RETURN_IF_ERROR(Descr(&info->descr));
      if (k == 1) DDPIO_RETURN_IF_ERROR(Bool("fortran_order", &info->fortran_order));
      if (k == 2) DDPIO_RETURN_IF_ERROR(Shape(&info->shape));
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
      } else if (!Peek('}')) {
        return Malformed(absl::StrCat("no ',' or '}' after the value of ", Quoted(key)));
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Malformed("text after the dict's closing '}'");
    static constexpr const char* kKeys[3] = {"descr", "fortran_order", "shape"};
    for (int k = 0; k < 3; ++k) {
      if (!seen[k]) return Damaged(absl::StrCat("its dict has no '", kKeys[k], "' key"));
    }
    return absl::OkStatus();
  }

 private:
  bool Peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  static bool IsWordChar(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '.';
  }

  // "<what> at byte N of the header (found X)".
  absl::Status Malformed(absl::string_view what) const {
    const std::string found = pos_ < text_.size() ? Quoted(text_.substr(pos_, 1)) : "its end";
    return Damaged(absl::StrCat(what, " at byte ", pos_, " of the header (found ", found, ")"));
  }

  // A quoted string without escapes (numpy's keys and simple dtypes need none).
  absl::StatusOr<absl::string_view> String(absl::string_view what) {
    if (!Peek('\'') && !Peek('"')) return Malformed(absl::StrCat("no quoted string for ", what));
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') {
        return Malformed(absl::StrCat("a backslash (an escape) in the string for ", what));
      }
      if (text_[pos_] == '\n') break;  // a quoted string ends on its line
      ++pos_;
    }
    if (pos_ == text_.size() || text_[pos_] != quote) {
      return Malformed(absl::StrCat("an unclosed string for ", what));
    }
    return text_.substr(start, pos_++ - start);
  }

  absl::Status Descr(std::string* descr) {
    if (Peek('[')) {
      return Damaged(
          "its 'descr' is a list of fields: structured dtypes are not supported (save each field "
          "as an array of its own)");
    }
    DDPIO_ASSIGN_OR_RETURN(absl::string_view text, String("'descr'"));
    descr->assign(text.data(), text.size());
    return absl::OkStatus();
  }

  absl::Status Bool(absl::string_view key, bool* value) {
    for (const auto& [word, v] :
         {std::pair<absl::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word &&
          (pos_ + word.size() == text_.size() || !IsWordChar(text_[pos_ + word.size()]))) {
        pos_ += word.size();
        *value = v;
        return absl::OkStatus();
      }
    }
    return Malformed(absl::StrCat(Quoted(key), " is not True or False"));
  }

  // A tuple of non-negative integers: "()", "(5,)", "(2, 3)", "(2, 3,)".
  absl::Status Shape(std::vector<uint64_t>* shape) {
    if (!Consume('(')) return Malformed("'shape' is not a tuple, as '(2, 3)'");
    SkipSpace();
    while (!Consume(')')) {
      if (shape->size() == kMaxDimensions) {
        return Damaged(absl::StrCat("its shape has more than ", kMaxDimensions, " dimensions"));
      }
      DDPIO_ASSIGN_OR_RETURN(uint64_t n, Dimension(shape->size()));
      shape->push_back(n);
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
      } else if (!Peek(')')) {
        return Malformed("no ',' or ')' after an entry of 'shape'");
      } else if (shape->size() == 1) {
        return Damaged(
            absl::StrCat("its shape (", n, ") is a number, not a tuple (numpy writes (", n, ",))"));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> Dimension(size_t index) {
    const auto not_integer = [&] {
      return Damaged(absl::StrCat("shape entry ", index, " is not a non-negative integer (found ",
                                  pos_ < text_.size() ? Quoted(text_.substr(pos_, 8)) : "the end",
                                  ")"));
    };
    if (pos_ == text_.size() || text_[pos_] < '0' || text_[pos_] > '9') return not_integer();
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && IsWordChar(text_[pos_ + 1]) &&
        text_[pos_ + 1] != 'L') {
      return not_integer();  // "01", "0x10", "0.5": Python has no leading zeros; not integers
    }
    uint64_t n = 0;
    for (; pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; ++pos_) {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (n > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        return Damaged(absl::StrCat("shape entry ", index, " is 2^64 or more"));
      }
      n = n * 10 + digit;
    }
    Consume('L');  // numpy on Python 2 wrote long ints so, and numpy still reads them
    if (pos_ < text_.size() && IsWordChar(text_[pos_])) return not_integer();
    return n;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// Sets the dtype fields of `info` from its descr: '<' (or '|' for one byte) then 'i', 'u' or 'f'
// then 1, 2, 4 or 8, as numpy's dtype.str spells the types ddpio reads.
absl::Status CheckDescr(NpyArrayInfo* info) {
  const std::string& d = info->descr;
  const char order = d.empty() ? '\0' : d[0];
  const char kind = d.size() < 2 ? '\0' : d[1];
  const int bytes = d.size() == 3 && d[2] >= '1' && d[2] <= '8' ? d[2] - '0' : 0;
  const bool numeric = kind == 'i' || kind == 'u' || kind == 'f';
  const bool width_ok = (bytes == 1 && kind != 'f') || bytes == 2 || bytes == 4 || bytes == 8;
  if (numeric && width_ok && order == '>') {
    const std::string fix = absl::StrCat("save a.astype('<", d.substr(1), "')");
    return Damaged(absl::StrCat(
        "dtype ", Quoted(d), " is big-endian; ddpio reads little-endian arrays only (", fix, ")"));
  }
  if (kind == 'O') {
    return Damaged(absl::StrCat("dtype ", Quoted(d),
                                " holds Python objects (pickled), which are not supported"));
  }
  if (!numeric || !width_ok || !(order == '<' || (order == '|' && bytes == 1))) {
    return Damaged(
        absl::StrCat("dtype ", Quoted(d),
                     " is not supported: ddpio reads little-endian integers of 1, 2, "
                     "4 or 8 bytes ('|u1', '<i4', ...) and floats of 2, 4 or 8 ('<f4')"));
  }
  info->item_bytes = bytes;
  info->is_signed = kind == 'i';
  info->is_unsigned = kind == 'u';
  info->is_float = kind == 'f';
  return absl::OkStatus();
}

// The shape's element count into info, and the array's bytes against the file's.
absl::Status CheckSize(NpyArrayInfo* info, uint64_t file_size) {
  const std::string shape = ShapeText(info->shape);
  uint64_t count = 1;
  for (uint64_t n : info->shape) {
    if (__builtin_mul_overflow(count, n, &count)) {
      return Damaged(absl::StrCat("shape ", shape, " has 2^64 elements or more"));
    }
  }
  uint64_t data_bytes = 0, total = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(info->item_bytes), &data_bytes)) {
    return Damaged(
        absl::StrCat("shape ", shape, " of ", Quoted(info->descr), " holds 2^64 bytes or more"));
  }
  const bool too_big = __builtin_add_overflow(info->data_offset, data_bytes, &total);
  if (too_big || total != file_size) {
    return Damaged(absl::StrCat("the file is ", file_size, " bytes, but its array of shape ", shape,
                                " of ", Quoted(info->descr), " (", data_bytes, " bytes) after ",
                                info->data_offset, " bytes of preamble and header makes ",
                                too_big ? std::string("2^64 or more") : absl::StrCat(total),
                                " bytes"));
  }
  info->element_count = count;
  return absl::OkStatus();
}

// Where the header lies in a file: after the magic, version and header length.
struct Preamble {
  size_t header_at = 0;      // 10 in version 1.0, 12 in 2.0 and 3.0
  uint64_t data_offset = 0;  // the header's end
};

// The preamble at the start of `bytes`, whose header lies within them and ends in a newline.
absl::StatusOr<Preamble> ParsePreamble(absl::Span<const uint8_t> bytes, uint64_t file_size) {
  if (bytes.empty() ||
      std::memcmp(bytes.data(), kNpyMagic, std::min(bytes.size(), sizeof(kNpyMagic))) != 0) {
    return absl::DataLossError("not a .npy file (it does not start with \"\\x93NUMPY\")");
  }
  if (bytes.size() < kMagicAndVersionBytes) {
    return Damaged(absl::StrCat("cut short at ", bytes.size(), " bytes, before its version"));
  }
  const int major = bytes[6], minor = bytes[7];
  if (minor != 0 || major < 1 || major > 3) {
    return Damaged(absl::StrCat("format version ", major, ".", minor,
                                " (ddpio reads versions 1.0, 2.0 and 3.0)"));
  }
  Preamble p;
  p.header_at = kMagicAndVersionBytes + (major == 1 ? 2 : 4);
  if (bytes.size() < p.header_at) {
    return Damaged(absl::StrCat("cut short at ", bytes.size(), " bytes, before its header length"));
  }
  const uint64_t header = major == 1 ? uint64_t{GetLe<uint16_t>(bytes.data() + 8)}
                                     : uint64_t{GetLe<uint32_t>(bytes.data() + 8)};
  p.data_offset = p.header_at + header;
  if (p.data_offset > bytes.size()) {
    return Damaged(absl::StrCat("its header of ", header, " bytes runs past the ", bytes.size(),
                                " bytes read (of a file of ", file_size, ")"));
  }
  if (header == 0 || bytes[p.data_offset - 1] != '\n') {
    return Damaged("its header does not end in a newline");
  }
  return p;
}

}  // namespace

absl::StatusOr<NpyArrayInfo> ParseNpyHeader(absl::Span<const uint8_t> bytes, uint64_t file_size) {
  NpyArrayInfo info;
  DDPIO_ASSIGN_OR_RETURN(const Preamble p, ParsePreamble(bytes, file_size));
  info.data_offset = p.data_offset;
  const absl::string_view header(reinterpret_cast<const char*>(bytes.data()) + p.header_at,
                                 p.data_offset - p.header_at);
  DDPIO_RETURN_IF_ERROR(HeaderParser(header).Parse(&info));
  DDPIO_RETURN_IF_ERROR(CheckDescr(&info));
  if (info.fortran_order && info.shape.size() > 1) {
    return Damaged(absl::StrCat("its array of shape ", ShapeText(info.shape),
                                " is in Fortran order; ddpio reads C order only (save "
                                "np.ascontiguousarray(a))"));
  }
  DDPIO_RETURN_IF_ERROR(CheckSize(&info, file_size));
  return info;
}

absl::StatusOr<NpyArrayInfo> ReadNpyFile(const std::string& path) {
  uint64_t size = 0;
  DDPIO_ASSIGN_OR_RETURN(Fd fd, OpenRegularFile(path, ".npy file", &size));
  std::vector<uint8_t> head(static_cast<size_t>(std::min(size, kMaxNpyHeaderBytes)));
  for (size_t got = 0; got < head.size();) {
    const ssize_t n =
        ::pread(fd.get(), head.data() + got, head.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, absl::StrCat("reading .npy file ", path));
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(path, ": the file ended at byte ", got,
                                              " while its header was read (it was ", size,
                                              " bytes when opened)"));
    }
    got += static_cast<size_t>(n);
  }
  absl::StatusOr<NpyArrayInfo> info = ParseNpyHeader(head, size);
  if (!info.ok()) return Annotate(info.status(), path);
  return info;
}

}  // namespace ddpio::convert
