// The record codec: one sample of a ddpio dataset as the bytes stored under its LMDB key.
//
// A record holds the label, the content type, the image geometry (read from the JPEG header at
// conversion, so a loader can plan buffers without decoding), the source file's relative name
// and the payload (the original JPEG bytes, never re-encoded). A CRC32C covers every byte after
// the checksum field, header and name included, so a flipped label is caught like a flipped
// pixel. A token record (a language-model dataset) holds one document's token ids instead: its
// label, channels and geometry are 0 and its payload is the ids, little-endian. Layout:
// docs/FORMAT.md. Pure functions, no IO, thread-safe.
#ifndef DDPIO_STORAGE_RECORD_H_
#define DDPIO_STORAGE_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddpio::storage {

enum class ContentType : uint8_t {
  kJpeg = 1,          // payload: a JPEG file
  kRawUint8 = 2,      // payload: height * width * channels bytes, HWC order
  kTokensUint16 = 3,  // payload: one document's token ids, 2 bytes each, little-endian
  kTokensUint32 = 4,  // payload: one document's token ids, 4 bytes each, little-endian
};

// Returns "jpeg", "raw_uint8", "tokens_uint16", "tokens_uint32" or "unknown(N)".
std::string ContentTypeName(ContentType type);

// Bytes per token id of a token record's type (2 or 4); 0 for an image type.
inline int TokenWidth(ContentType type) {
  return type == ContentType::kTokensUint16 ? 2 : type == ContentType::kTokensUint32 ? 4 : 0;
}
// The token type whose ids are `width` bytes (2: kTokensUint16, else kTokensUint32).
inline ContentType TokenType(int width) {
  return width == 2 ? ContentType::kTokensUint16 : ContentType::kTokensUint32;
}
// Token id `i` of a token record's payload (i < payload.size() / TokenWidth(type)).
inline uint32_t TokenAt(absl::Span<const uint8_t> payload, int width, size_t i) {
  const uint8_t* p = payload.data() + i * static_cast<size_t>(width);
  return width == 2
             ? uint32_t{p[0]} | uint32_t{p[1]} << 8
             : uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// A non-owning view of one record. Who owns the bytes behind `source_name` and `payload` is
// said by whoever returns the view (for DatasetReader: the read transaction).
struct RecordView {
  int32_t label = 0;
  ContentType type = ContentType::kJpeg;
  uint16_t channels = 0;
  uint32_t height = 0;
  uint32_t width = 0;
  std::string_view source_name;
  absl::Span<const uint8_t> payload;
  // The image's size before `convert --max-side` shrank it; 0 x 0 when it was stored as found.
  uint32_t original_height = 0;
  uint32_t original_width = 0;
  // A JPEG with restart markers: the byte offset in the payload of each restart segment and of
  // the end of the last (loader/jpeg_restart.h), 4 bytes little-endian each; empty when not
  // recorded.
  absl::Span<const uint8_t> segment_offsets;
};

// An owning record (tools and tests; the hot path uses views).
struct Record {
  int32_t label = 0;
  ContentType type = ContentType::kJpeg;
  uint16_t channels = 0;
  uint32_t height = 0;
  uint32_t width = 0;
  std::string source_name;
  std::vector<uint8_t> payload;
  uint32_t original_height = 0;
  uint32_t original_width = 0;
  std::vector<uint8_t> segment_offsets;

  static Record FromView(const RecordView& view);
  // A view of this record, valid while it lives unchanged.
  RecordView view() const;
};

// Layout 1: a 28-byte header, the name, the payload. Layout 2 (written only for records that
// carry extensions, such as the original geometry) adds a 4-byte extension length to the header
// and the extension entries between name and payload. Layout 3 is layout 2 whose checksum also
// covers the record's binding (below): written by every conversion since format version 3.
// Readers read all three.
inline constexpr uint8_t kRecordLayoutVersion = 1;
inline constexpr uint8_t kRecordLayoutVersionExtended = 2;
inline constexpr uint8_t kRecordLayoutVersionBound = 3;
inline constexpr size_t kRecordHeaderSize = 28;
inline constexpr size_t kRecordHeaderSizeExtended = 32;
inline constexpr size_t kMaxSourceNameSize = 65535;

// Where a record belongs: its dataset's record salt (DatasetHeader, dataset_info.h: one per
// LMDB file, so per shard) and its key (the index within that file). A layout 3 record's CRC32C
// starts from the CRC32C of these 16 bytes (salt then key, 8 bytes little-endian each), so a
// record moved to another key, swapped with another or copied from another dataset or shard fails
// its checksum wherever it is read. `required`: the dataset binds its records, so a record of
// layout 1 or 2 found in it is DataLoss (an older record slipped in).
struct RecordBinding {
  uint64_t salt = 0;
  uint64_t key = 0;
  bool required = false;
};

// The record's image as a file any decoder opens: a JPEG payload as it is; raw pixels (3 or 1
// channels) as a binary PPM / PGM — header "P6\nW H\n255\n" then the pixels. InvalidArgument for
// other raw channel counts or a raw payload of the wrong size.
absl::StatusOr<std::string> ImageFileBytes(const RecordView& record);

// With `binding`, layout 3 bound to it; without, layout 1 when `record` has nothing for the
// extension area, else layout 2. Writes the encoded record to `*out` (which is cleared first).
// InvalidArgument when the name is longer than kMaxSourceNameSize or the payload is 4 GiB or more.
absl::Status EncodeRecord(const RecordView& record, std::string* out,
                          const RecordBinding* binding = nullptr);

// The encoded size of `record` (header + name + extensions + payload), bound or not.
size_t EncodedRecordSize(const RecordView& record, bool bound = false);

// Parses `bytes` into a view pointing into `bytes`. With `verify_checksum`, recomputes the
// CRC32C — for a layout 3 record from `binding`, which must then be given (FailedPrecondition
// otherwise). DataLoss when the record is truncated, has trailing bytes, an unknown layout version
// or content type, a malformed extension area, a checksum mismatch (for a bound record: it is not
// the record of this key in this dataset, or is damaged), or is unbound where `binding->required`;
// unknown extension entries are skipped (a later ddpio may add some); the message says which and
// the sizes involved (the caller adds the index and key).
absl::Status DecodeRecord(absl::Span<const uint8_t> bytes, bool verify_checksum, RecordView* out,
                          const RecordBinding* binding = nullptr);

// The layout version byte of an encoded record (0 when too short to have one).
uint8_t RecordLayoutOf(absl::Span<const uint8_t> bytes);

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_RECORD_H_
