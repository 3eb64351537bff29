// Source kind "dataset" (`ddpio convert --from dataset --src DATASET`): an existing ddpio dataset
// (any format version, sharded or not) as a conversion source, to rewrite it with other options —
// restart markers for the loader's segment decode (loader/jpeg_restart.h), --max-side, --shards —
// without the original image folder. Entries are its records in index order with their labels and
// source names; classes are its classes. JPEG records hand over their bytes, raw records their
// pixels, and a record shrunk by an earlier --max-side keeps its recorded original geometry.
//
// UpgradeInPlace rewrites the dataset where it is: the new one is written beside it
// (DATASET.upgrading, resumable), then swapped in by two renames; a run interrupted between them
// is finished by the next run. The old dataset is removed only once the new one is complete.
#ifndef DDPIO_CONVERT_DATASET_SOURCE_H_
#define DDPIO_CONVERT_DATASET_SOURCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "ddpio/convert/convert.h"
#include "ddpio/convert/convert_sources.h"
#include "ddpio/convert/source_reader.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::convert {

// Kind "ddpio-dataset". DataLoss naming the index for a record that does not read.
absl::StatusOr<SourceListing> ListDataset(const storage::DatasetReader& dataset);

// Thread-safe (each Read opens its own read transaction).
class DatasetSourceReader : public SourceReader {
 public:
  explicit DatasetSourceReader(const storage::DatasetReader* dataset)
      : dataset_(dataset) {}  // not owned
  absl::StatusOr<SourceItem> Read(uint64_t index, const SourceEntry& entry) override;
  std::string Describe(const SourceEntry& entry) const override;

 private:
  const storage::DatasetReader* const dataset_;
};

// Where UpgradeInPlace writes the new dataset, and where the old one waits during the swap.
std::string UpgradingPath(const std::string& dataset);
std::string ReplacedPath(const std::string& dataset);

// Converts the dataset at `path` with `options` (whose `out`, `reader` and `writer.single_file`
// it sets) and swaps the result in. options.resume continues an interrupted upgrade; without it
// an existing UpgradingPath is AlreadyExists (naming it). Errors from opening or converting
// (Cancelled too, `progress` as for Convert) leave `path` untouched.
absl::StatusOr<ConvertSummary> UpgradeInPlace(const std::string& path, ConvertOptions options,
                                              SourceListing* listing,
                                              const ProgressCallback& progress = nullptr);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_DATASET_SOURCE_H_
