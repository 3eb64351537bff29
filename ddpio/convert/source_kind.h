// What a conversion reads, as an enum with the names users type (`ddpio convert --from NAME`,
// `ddpio.convert(..., source="NAME")`). Pure functions, thread-safe.
//
//   imagefolder  an ImageFolder tree (convert_sources.h), or with `val_labels` a flat folder of
//                ImageNet validation images (imagenet_labels.h)
//   list         a list file of "relative/path label" lines (Caffe style)
//   caffe-lmdb   a Caffe/DALI LMDB of Datum messages (caffe_lmdb.h)
//   dataset      a ddpio dataset, rewritten with the conversion's options (dataset_source.h)
#ifndef DDPIO_CONVERT_SOURCE_KIND_H_
#define DDPIO_CONVERT_SOURCE_KIND_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace ddpio::convert {

enum class SourceKind { kImageFolder, kList, kCaffeLmdb, kDataset };

// "imagefolder", "list", "caffe-lmdb" or "dataset".
std::string_view SourceKindName(SourceKind kind);

// The kind named `name` (exactly as SourceKindName spells it). InvalidArgument naming `name` and
// listing the valid names otherwise.
absl::StatusOr<SourceKind> ParseSourceKind(std::string_view name);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_SOURCE_KIND_H_
