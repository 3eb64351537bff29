// NumPy's .npy file (numpy.save, numpy.lib.format), versions 1.0, 2.0 and 3.0, as
// numpy/lib/format.py writes it:
//   "\x93NUMPY" | u8 major | u8 minor | header length (u16 LE in 1.0, u32 LE in 2.0 and 3.0)
//   | header: a Python dict literal, padded with spaces and ending in '\n', e.g.
//       {'descr': '<u2', 'fortran_order': False, 'shape': (1234,), }
//   | the array's bytes (data_offset = preamble + header length), to the end of the file.
// ddpio reads arrays of little-endian integers and floats (token ids, labels, features) in C
// order. ParseNpyHeader takes the bytes from outside as untrusted: the header is read by a small
// bounded parser of exactly the dict literal numpy writes (no eval, no regex), nothing is read past
// the bytes given, nothing is allocated beyond the header's size, and the shape must account for
// the file's size exactly, so a damaged or hostile file is an error saying what is wrong, never a
// crash. Pure functions apart from ReadNpyFile's reading; thread-safe.
//
//   DDPIO_ASSIGN_OR_RETURN(NpyArrayInfo info, ReadNpyFile("tokens.npy"));
//   // info.element_count elements of info.item_bytes bytes at info.data_offset.
#ifndef DDPIO_CONVERT_NPY_FILE_H_
#define DDPIO_CONVERT_NPY_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddpio::convert {

inline constexpr char kNpyMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

// What a .npy header says about its array.
struct NpyArrayInfo {
  std::string descr;            // as written, e.g. "<u2"
  int item_bytes = 0;           // 1, 2, 4 or 8
  bool is_signed = false;       // kind 'i'
  bool is_unsigned = false;     // kind 'u'
  bool is_float = false;        // kind 'f' (neither signed nor unsigned)
  bool fortran_order = false;   // only ever true for 0 or 1 dimensions (the same bytes as C order)
  std::vector<uint64_t> shape;  // empty for a scalar (shape ())
  uint64_t data_offset = 0;     // where the array's bytes start in the file
  uint64_t element_count = 0;   // product of shape (1 for shape ())
};

// The most header bytes ParseNpyHeader needs: the 12-byte preamble of a version 2.0 file and a
// header of up to 64 KiB (numpy's own reader refuses headers over 10000 bytes by default).
inline constexpr uint64_t kMaxNpyHeaderBytes = 65536 + 12;

// The header at the start of `bytes` (the first bytes of the file, owned by the caller for the
// call: at least min(file size, kMaxNpyHeaderBytes) of them) of a file of `file_size` bytes.
// DataLoss saying what is wrong for: no "\x93NUMPY" magic ("not a .npy file"), a format version
// other than 1.0, 2.0 or 3.0, a header running past `bytes`, a header that is not the dict literal
// numpy writes (keys 'descr', 'fortran_order', 'shape', each once, in any order), a dtype that is
// not a little-endian integer of 1, 2, 4 or 8 bytes or float of 2, 4 or 8 (big-endian, bool,
// complex, string, object and structured dtypes are refused, each named as such), fortran_order
// True with more than one dimension, shape entries that are not non-negative integers, more than
// 32 dimensions, an element count or byte count over 2^64, and data that does not fill the file
// exactly (data_offset + element_count * item_bytes != file_size; both sizes named).
absl::StatusOr<NpyArrayInfo> ParseNpyHeader(absl::Span<const uint8_t> bytes, uint64_t file_size);

// The header of the .npy file at `path`: its first min(size, kMaxNpyHeaderBytes) bytes, read with
// pread, through ParseNpyHeader. Every error names `path`: NotFound / PermissionDenied from the
// filesystem, InvalidArgument for something other than a regular file (a FIFO, a directory),
// DataLoss for a file that changes size while read and for ParseNpyHeader's errors.
absl::StatusOr<NpyArrayInfo> ReadNpyFile(const std::string& path);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_NPY_FILE_H_
