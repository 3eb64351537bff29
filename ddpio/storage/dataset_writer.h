// DatasetWriter: creates (or resumes) a ddpio dataset in an LMDB environment.
//
// Records are appended in index order and buffered in memory; the caller commits a batch when
// BatchFull() says so (one large LMDB transaction, fsynced). Because nothing commits behind the
// caller's back, a caller can store its own progress with PutMeta in the same transaction as
// the records it describes, and a crash leaves exactly the last committed batch: Resume
// continues from there. When LMDB reports the map full the writer doubles the map and replays
// the batch. Finish writes the last records and the completion marker in one transaction, so a
// dataset is either complete or visibly incomplete — never half-marked.
//
//   DDPIO_ASSIGN_OR_RETURN(auto writer, DatasetWriter::Create(path, header, {}));
//   for (...) {
//     DDPIO_RETURN_IF_ERROR(writer->Append(record));
//     if (writer->BatchFull()) DDPIO_RETURN_IF_ERROR(writer->Commit());
//   }
//   DDPIO_RETURN_IF_ERROR(writer->Finish(/*skipped=*/0));
//
// Not thread-safe: one thread drives a writer. One writer per dataset (LMDB's lock enforces it
// across processes).
#ifndef DDPIO_STORAGE_DATASET_WRITER_H_
#define DDPIO_STORAGE_DATASET_WRITER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/record.h"

namespace ddpio::storage {

struct WriterOptions {
  // false (default): `path` is a directory holding data.mdb and lock.mdb. true: `path` is one
  // file (LMDB's MDB_NOSUBDIR; the lock file is `path`-lock), handy for copying around.
  bool single_file = false;
  // Initial LMDB map size; doubled whenever LMDB reports the map full. Default 1 GiB. The file
  // only occupies what is written, so a large map costs address space, not disk.
  uint64_t initial_map_size = uint64_t{1} << 30;
  // BatchFull() turns true once the pending batch holds this many payload bytes (default
  // 64 MiB) or records (default 8192). Larger batches mean fewer fsyncs; smaller ones lose less
  // work to a crash and use less memory.
  uint64_t batch_bytes = uint64_t{64} << 20;
  uint64_t batch_records = 8192;
};

class DatasetWriter {
 public:
  // Creates a new, empty dataset. AlreadyExists when `path` exists; InvalidArgument, before
  // anything is created, when `header` holds more than a reader accepts (kMaxClasses,
  // kMaxClassNameBytes, kMaxHeaderBytes in dataset_info.h); PermissionDenied / ResourceExhausted
  // from the filesystem.
  static absl::StatusOr<std::unique_ptr<DatasetWriter>> Create(const std::string& path,
                                                               const DatasetHeader& header,
                                                               const WriterOptions& options);

  // Reopens an incomplete dataset to continue it after its last committed batch. The layout
  // (directory or single file) is detected. NotFound when nothing is at `path`; AlreadyExists
  // when the dataset is already complete; FailedPrecondition when its stored header differs
  // from `header` (another source or other options: resuming would mix two datasets).
  static absl::StatusOr<std::unique_ptr<DatasetWriter>> Resume(const std::string& path,
                                                               const DatasetHeader& header,
                                                               const WriterOptions& options);

  ~DatasetWriter();
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // Buffers one record under index record_count() — in a format-3 dataset bound to that key
  // (record.h, RecordBinding). InvalidArgument from the record codec.
  absl::Status Append(const RecordView& record);
  // Buffers a metadata entry written with the next commit. Keys "dataset", "complete" and
  // "writer" are reserved (InvalidArgument).
  absl::Status PutMeta(std::string key, std::string value);
  // A committed metadata value, or nullopt.
  absl::StatusOr<std::optional<std::string>> GetMeta(const std::string& key) const;

  bool BatchFull() const;
  // Commits the pending batch in one transaction. ResourceExhausted when the disk is full
  // (nothing of the batch is written; everything committed before stays).
  absl::Status Commit();
  // Commits the pending batch plus the completion marker, then syncs. After Finish the writer
  // accepts nothing more (FailedPrecondition).
  absl::Status Finish(uint64_t skipped);

  uint64_t record_count() const { return committed_ + pending_.size(); }
  uint64_t committed_count() const { return committed_; }
  // Payload bytes of all records, committed and pending.
  uint64_t payload_bytes() const { return committed_payload_bytes_ + pending_payload_bytes_; }
  uint64_t map_size() const { return map_size_; }
  const std::string& path() const { return path_; }

 private:
  struct Lmdb;
  DatasetWriter(std::string path, WriterOptions options, std::unique_ptr<Lmdb> lmdb);
  static absl::StatusOr<std::unique_ptr<DatasetWriter>> OpenEnv(const std::string& path,
                                                                const WriterOptions& options,
                                                                bool create);
  absl::Status CommitPending(const std::optional<DatasetCompletion>& completion);
  absl::Status Grow();

  // Constant after construction.
  const std::string path_;
  const WriterOptions options_;
  std::unique_ptr<Lmdb> lmdb_;

  uint64_t map_size_ = 0;
  uint64_t committed_ = 0;
  uint64_t committed_payload_bytes_ = 0;
  bool finished_ = false;
  // The pending batch: encoded records back to back in arena_, with their sizes.
  std::string arena_;
  std::vector<size_t> pending_;  // encoded size of each pending record
  uint64_t pending_payload_bytes_ = 0;
  std::vector<std::pair<std::string, std::string>> pending_meta_;
  std::string scratch_;
  // Format 3: each record bound to its key with this salt (RecordSalt of the header).
  bool bound_ = false;
  uint64_t salt_ = 0;
};

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_DATASET_WRITER_H_
