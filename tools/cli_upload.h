// Uploading a dataset from the command line, shared by `ddpio upload` and `ddpio convert --out
// s3://…` (which converts into a local staging folder, then uploads it).
#ifndef DDPIO_TOOLS_CLI_UPLOAD_H_
#define DDPIO_TOOLS_CLI_UPLOAD_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "ddpio/storage/remote/upload.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::tools {

// Where an upload goes, checked before any work: the URL parsed and the store's configuration
// read from the environment (AWS_*), so a typo fails at once, not after hours of conversion.
struct UploadTarget {
  storage::s3::S3Url url;
  storage::s3::S3Config config;
};
absl::StatusOr<UploadTarget> CheckUploadTarget(const std::string& url);

// How an upload lays the records out in the store (storage::remote::UploadOptions): the flags
// `upload` and `convert --out s3://` share, defined here once.
struct UploadLayoutFlags {
  uint64_t chunk_mb = storage::remote::UploadOptions::kDefaultChunkBytes >> 20;
  int spread_prefixes = 1;
  void ApplyTo(storage::remote::UploadOptions& o) const {
    o.chunk_bytes = chunk_mb << 20;
    o.spread_prefixes = spread_prefixes;
  }
};
// `what`: how the flags' help begins ("" for `upload`, "With --out s3://: " for `convert`).
void AddUploadLayoutFlags(CLI::App* app, UploadLayoutFlags* flags, const std::string& what);

// storage::remote::Upload with progress lines on stderr when `show` (the index, then MiB sent).
absl::StatusOr<storage::remote::UploadResult> UploadWithProgress(
    const std::string& src, const UploadTarget& target, storage::remote::UploadOptions options,
    bool show);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CLI_UPLOAD_H_
