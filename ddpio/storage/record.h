// The record codec: one sample of a ddpio dataset as the bytes stored under its LMDB key.
//
// A record holds the label, the content type, the image geometry (read from the JPEG header at
// conversion, so a loader can plan buffers without decoding), the source file's relative name
// and the payload (the original JPEG bytes, never re-encoded). A CRC32C covers every byte after
// the checksum field, header and name included, so a flipped label is caught like a flipped
// pixel. Layout: docs/FORMAT.md. Pure functions, no IO, thread-safe.
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
  kJpeg = 1,      // payload: a JPEG file
  kRawUint8 = 2,  // payload: height * width * channels bytes, HWC order
};

// Returns "jpeg", "raw_uint8" or "unknown(N)".
std::string ContentTypeName(ContentType type);

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
// and the extension entries between name and payload. Readers read both.
inline constexpr uint8_t kRecordLayoutVersion = 1;
inline constexpr uint8_t kRecordLayoutVersionExtended = 2;
inline constexpr size_t kRecordHeaderSize = 28;
inline constexpr size_t kRecordHeaderSizeExtended = 32;
inline constexpr size_t kMaxSourceNameSize = 65535;

// The record's image as a file any decoder opens: a JPEG payload as it is; raw pixels (3 or 1
// channels) as a binary PPM / PGM — header "P6\nW H\n255\n" then the pixels. InvalidArgument for
// other raw channel counts or a raw payload of the wrong size.
absl::StatusOr<std::string> ImageFileBytes(const RecordView& record);

// Layout 1 when `record` has nothing for the extension area, else layout 2.
// Appends the encoded record to `*out` (which is cleared first). InvalidArgument when the name
// is longer than kMaxSourceNameSize or the payload is 4 GiB or more.
absl::Status EncodeRecord(const RecordView& record, std::string* out);

// The encoded size of `record` (header + name + payload).
size_t EncodedRecordSize(const RecordView& record);

// Parses `bytes` into a view pointing into `bytes`. With `verify_checksum`, recomputes the
// CRC32C. DataLoss when the record is truncated, has trailing bytes, an unknown layout version
// or content type, a malformed extension area, or a checksum mismatch; unknown extension entries
// are skipped (a later ddpio may add some); the message says which and the sizes involved (the
// caller adds the index and key).
absl::Status DecodeRecord(absl::Span<const uint8_t> bytes, bool verify_checksum, RecordView* out);

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_RECORD_H_
