// Reading an LMDB that is not a ddpio dataset — a Caffe or DALI LMDB being imported by
// `ddpio convert --from caffe-lmdb` — through the same safety checks as DatasetReader (a file cut
// short or with a damaged meta page is DataLoss, not SIGBUS).
//
//   ASSIGN_OR_RETURN(auto lmdb, LmdbFile::Open("/data/caffe_train_lmdb"));
//   RETURN_IF_ERROR(lmdb->ForEach([](std::string_view key, absl::Span<const uint8_t> value)
//   {...}));
//
// Opens read-only (without LMDB's lock file when the location is not writable); the file must
// not be written while it is read. Thread-safe: Get may be called from many threads at once.
#ifndef DDPIO_STORAGE_LMDB_FILE_H_
#define DDPIO_STORAGE_LMDB_FILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ddpio::storage {

class LmdbFile {
 public:
  // Receives a view valid only during the call.
  using Visitor =
      std::function<absl::Status(std::string_view key, absl::Span<const uint8_t> value)>;

  // `path`: an LMDB directory (with data.mdb) or a single-file LMDB. NotFound when missing;
  // DataLoss when it is not an LMDB or is damaged.
  static absl::StatusOr<std::unique_ptr<LmdbFile>> Open(const std::string& path);
  ~LmdbFile();
  LmdbFile(const LmdbFile&) = delete;
  LmdbFile& operator=(const LmdbFile&) = delete;

  // Every entry of the main (unnamed) database in key order; stops at the first error `fn`
  // returns and returns it.
  absl::Status ForEach(const Visitor& fn) const;

  // `fn` on the value stored under `key`. NotFound naming the key when there is none.
  absl::Status Get(std::string_view key, const Visitor& fn) const;

  const std::string& path() const { return path_; }

 private:
  struct Env;
  LmdbFile(std::string path, std::unique_ptr<Env> env);
  const std::string path_;
  const std::unique_ptr<Env> env_;
};

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_LMDB_FILE_H_
