// Where `ddpio convert` gets each source entry's bytes: files under the listing's root, or
// another store (a Caffe LMDB, ddpio/convert/caffe_lmdb.h) behind the same interface.
#ifndef DDPIO_CONVERT_SOURCE_READER_H_
#define DDPIO_CONVERT_SOURCE_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/convert/convert_sources.h"

namespace ddpio::convert {

// One source entry as read: an image file's bytes, or pixels already decoded.
struct SourceItem {
  std::vector<uint8_t> bytes;  // an image file; or raw_height * raw_width * 3 RGB bytes
  int raw_width = 0;           // > 0: `bytes` are raw RGB pixels of this size
  int raw_height = 0;
  // > 0: the image's size before an earlier `convert --max-side` (a ddpio dataset as the source).
  int original_width = 0;
  int original_height = 0;
};

// Thread-safe: the converter's threads call Read concurrently.
class SourceReader {
 public:
  virtual ~SourceReader() = default;
  // DataLoss / NotFound / PermissionDenied for a bad entry (the converter can skip those);
  // other codes for trouble that is the machine's, not the entry's.
  virtual absl::StatusOr<SourceItem> Read(uint64_t index, const SourceEntry& entry) = 0;
  // Names the entry in messages (a path, an LMDB key).
  virtual std::string Describe(const SourceEntry& entry) const = 0;
};

// Files larger than this are refused: no photo is 1 GiB, and a source pointing at a huge file
// (or a device through a symlink) must not exhaust memory.
inline constexpr uint64_t kMaxSourceFileBytes = uint64_t{1} << 30;

// Reads root/entry.relative whole. Non-regular files (FIFOs, devices) and files over
// kMaxSourceFileBytes are DataLoss, without blocking or reading them.
class FileSourceReader : public SourceReader {
 public:
  explicit FileSourceReader(std::string root) : root_(std::move(root)) {}
  absl::StatusOr<SourceItem> Read(uint64_t index, const SourceEntry& entry) override;
  std::string Describe(const SourceEntry& entry) const override;

 private:
  const std::string root_;
};

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_SOURCE_READER_H_
