#include "ddpio/storage/internal/record_store.h"

#include <sys/stat.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::storage::internal {

std::string RecordName(uint64_t index, const std::string& dataset) {
  return absl::StrCat("record ", index, " (key ", IndexKeyHex(index), ") of ", dataset);
}

absl::StatusOr<StoredRecord> RecordStoreTxn::Refetch(uint64_t index) {
  return absl::UnimplementedError(
      absl::StrCat("record ", index, ": this store holds the stored bytes, no copies to refetch"));
}

std::string RecordStoreTxn::Where(uint64_t) const { return std::string(); }

bool IsShardedDataset(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         ::stat((path + "/" + kShardManifest).c_str(), &st) == 0;
}

absl::StatusOr<DatasetReader::Summary> PeekRecordStore(const std::string& path,
                                                       const ReaderOptions& options) {
  if (s3::IsS3Url(path)) return PeekRemoteStore(path, options);
  DDPIO_ASSIGN_OR_RETURN(OpenedStore opened, OpenRecordStore(path, options));
  return DatasetReader::Summary{std::move(opened.header), opened.completion, std::nullopt};
}

absl::StatusOr<OpenedStore> OpenRecordStore(const std::string& path, const ReaderOptions& options) {
  if (s3::IsS3Url(path)) return OpenRemoteStore(path, options);
  if (IsShardedDataset(path)) return OpenShardedStore(path, options);
  return OpenLmdbStore(path, options);
}

}  // namespace ddpio::storage::internal
