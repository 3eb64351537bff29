// Upload: puts a local dataset (a directory, a single LMDB file or a sharded folder) into an
// object store as a remote dataset (remote_format.h): its records in chunk objects of at most
// UploadOptions::chunk_bytes (or each LMDB file as an object, multipart for large ones), then the
// record index, then the manifest — last, so a reader never opens a half-uploaded dataset. Every
// record is read and checked (its CRC32C) while the index is built, so a damaged local dataset is
// refused before anything is sent; a record whose bytes differ when its chunk is sent (the
// dataset changed under the upload) fails the upload, and no manifest is written. A token
// dataset's document lengths are taken from its records into the index (remote_format.h, manifest
// version 4), held to the lengths the dataset recorded: one that differs is refused (DataLoss).
//
// Resumable: the upload keeps its state (multipart upload ids, and the ETag of each object sent)
// in a small file beside the dataset (DATASET.ddpio-upload, or DATASET/ddpio-upload.json for a
// folder); run it again after an interruption and it sends only what the store does not hold
// yet — an object counts as held only while the store has it with the ETag it gave this upload.
// The state file is removed when the manifest is written.
//
// One upload at a time per prefix (upload_lock.h): another upload to the same prefix is refused
// while this one runs, naming it; and before and after the manifest is written, every object is
// checked to be still this upload's, so a store that ignores the lock's conditional writes makes
// one of two racing uploads fail (its manifest withdrawn), never both succeed over a mix.
#ifndef DDPIO_STORAGE_REMOTE_UPLOAD_H_
#define DDPIO_STORAGE_REMOTE_UPLOAD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/remote/upload_lock.h"
#include "ddpio/storage/s3/http_client.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::storage::remote {

struct UploadProgress {
  std::string stage;  // "indexing", "uploading", "done"
  uint64_t done = 0;  // records indexed, or bytes sent
  uint64_t total = 0;
};

struct UploadOptions {
  // Multipart part size for objects larger than it (S3 requires at least 5 MiB but for the last).
  uint64_t part_bytes = uint64_t{32} << 20;
  // The records go into chunk objects of at most this many bytes (a record larger than it is a
  // chunk of its own): whole records, back to back, in dataset order, never two files' (shards')
  // records in one (docs/FORMAT.md). 0: the LMDB file(s) as they are, one object each (the layout
  // of ddpio before chunk objects, which any reader of version 2 manifests reads).
  uint64_t chunk_bytes = kDefaultChunkBytes;
  static constexpr uint64_t kDefaultChunkBytes = uint64_t{64} << 20;
  // Chunk objects go under this many key prefixes (PREFIX/chunks/<2 hex digits>/…, chosen by a
  // hash of the chunk's number), so that a store's per-prefix request limits (S3: ~5,500 GETs/s a
  // partitioned prefix) multiply. 1 to kMaxSpreadPrefixes.
  int spread_prefixes = 1;
  static constexpr int kMaxSpreadPrefixes = 256;
  // Replace a different dataset already at the destination (its manifest is deleted first, so
  // nobody reads a mix). Without it, that is FailedPrecondition.
  bool overwrite = false;
  // Create the bucket when it does not exist (fine when this account owns it already).
  bool create_bucket = false;
  s3::RetryPolicy retry;
  // The prefix's lock: its lease (an upload that died frees the prefix after it), a clock.
  UploadLockOptions lock;
  // Called now and then; returning false stops the upload (Cancelled), resumable.
  std::function<bool(const UploadProgress&)> progress;
};

struct UploadResult {
  RemoteManifest manifest;
  uint64_t bytes_sent = 0;     // this run (a resumed run sends less)
  uint64_t bytes_skipped = 0;  // already in the store from an earlier run
  // The same dataset was at the destination: nothing sent. Only a manifest that identifies its
  // records (version 2) can say so; over an older one, the upload is sent again (overwrite).
  bool already_there = false;
};

absl::StatusOr<UploadResult> Upload(const std::string& local_path, const std::string& url,
                                    const s3::S3Config& config, const UploadOptions& options = {});

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_UPLOAD_H_
