// Uploading a dataset from the command line, shared by `ddpio upload` and `ddpio convert --out
// s3://…` (which converts into a local staging folder, then uploads it).
#ifndef DDPIO_TOOLS_CLI_UPLOAD_H_
#define DDPIO_TOOLS_CLI_UPLOAD_H_

#include <string>

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

// storage::remote::Upload with progress lines on stderr when `show` (the index, then MiB sent).
absl::StatusOr<storage::remote::UploadResult> UploadWithProgress(
    const std::string& src, const UploadTarget& target, storage::remote::UploadOptions options,
    bool show);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CLI_UPLOAD_H_
