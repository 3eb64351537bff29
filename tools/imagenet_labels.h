// ImageNet's validation labels, in the two layouts people download, turned into a source listing
// for `ddpio convert`.
//
//   LOC_val_solution.csv (Kaggle's ILSVRC LOC release): a header "ImageId,PredictionString",
//     then "ILSVRC2012_val_00008726,n02119789 255 142 454 329 n02119789 44 21 322 295"; the
//     image's class is the first synset of PredictionString.
//   ILSVRC2012_validation_ground_truth.txt (the 2012 devkit): line i holds the ILSVRC2012_ID of
//     ILSVRC2012_val_<i as 8 digits>; IDs are resolved through a synset file in the devkit's
//     ID order: one wnid per line (line k is ID k), or map_clsloc.txt lines "wnid ID name".
// Classes are the sorted synsets the label source names, which is the order torchvision's
// ImageFolder gives the training folder when it holds the same synsets.
#ifndef DDPIO_TOOLS_IMAGENET_LABELS_H_
#define DDPIO_TOOLS_IMAGENET_LABELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tools/convert_sources.h"

namespace ddpio::tools {

// What a hostile labels file can cost: at most this many lines of at most this many bytes.
inline constexpr size_t kMaxLabelLines = 10'000'000;
inline constexpr size_t kMaxLabelLineBytes = 64 << 10;

struct ValLabels {
  std::string format;  // "LOC_val_solution.csv" or "ILSVRC2012_validation_ground_truth.txt"
  std::vector<std::string> classes;                    // sorted synsets; label i is classes[i]
  absl::flat_hash_map<std::string, int32_t> by_image;  // file name without extension -> label
};

// The format is recognised from the content (the CSV's header line). NotFound for a missing file;
// InvalidArgument naming "FILE:LINE" for a malformed line, an ID the synset file lacks, an image
// named twice; InvalidArgument when a ground-truth file comes without `synsets_path` (saying
// where the devkit order comes from). `synsets_path` is ignored for the CSV.
absl::StatusOr<ValLabels> ReadValLabels(const std::string& labels_path,
                                        const std::string& synsets_path);

// The images directly in `root` (torchvision's extensions, sorted by name; sub-folders are not
// looked into), each labelled by its name without extension. InvalidArgument naming the first image
// `labels` does not cover and how many such images there are; NotFound when `root` is missing or
// holds no image.
absl::StatusOr<SourceListing> ListLabeledFolder(const std::string& root, const ValLabels& labels,
                                                const std::string& labels_path);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_IMAGENET_LABELS_H_
