// ImageNet's validation labels, in the two layouts people download, turned into a source listing
// for `ddpio convert`.
//
//   LOC_val_solution.csv (Kaggle's ILSVRC LOC release): a header "ImageId,PredictionString",
//     then "ILSVRC2012_val_00008726,n02119789 255 142 454 329 n02119789 44 21 322 295"; the
//     image's class is the first synset of PredictionString.
//   ILSVRC2012_validation_ground_truth.txt (the 2012 devkit): line i holds the ILSVRC2012_ID of
//     ILSVRC2012_val_<i as 8 digits>; IDs are resolved through a synset file in the devkit's
//     ID order: one wnid per line (line k is ID k), or map_clsloc.txt lines "wnid ID name".
// The format is told by content, not by file name: a first line "ImageId,PredictionString" (after
// an optional UTF-8 BOM) is the CSV. Every file may use "\r\n" line ends and end in blank lines;
// blank lines elsewhere, comments and stray fields are errors, since a skipped ground-truth line
// would silently shift every later image's label.
// Classes are the sorted synsets the label source names (for the ground truth: every synset of the
// synset file, used or not), which is the order torchvision's ImageFolder gives the training
// folder when it holds the same synsets.
//
// The devkit ships the ID order only in data/meta.mat; one wnid per line in ID order is exported
// with (torchvision reads meta.mat the same way; the 1000 classes are the IDs up to 1000):
//   python3 -c "import scipy.io; s = scipy.io.loadmat('meta.mat', squeeze_me=True)['synsets'];
//     print('\n'.join(x['WNID'] for x in sorted(s, key=lambda x: x['ILSVRC2012_ID'])
//     if x['ILSVRC2012_ID'] <= 1000))" > wnids.txt
//
// Called by `ddpio convert --val-labels` on one thread; the functions keep no state.
#ifndef DDPIO_CONVERT_IMAGENET_LABELS_H_
#define DDPIO_CONVERT_IMAGENET_LABELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ddpio/convert/convert_sources.h"

namespace ddpio::convert {

// What a hostile labels or synset file can cost: files are read a line at a time, and refused past
// this many lines or at a line longer than this many bytes; a CSV ImageId longer than 255 bytes
// (NAME_MAX: it could not name a file) is refused too, so ValLabels holds at most kMaxLabelLines
// short names.
inline constexpr size_t kMaxLabelLines = 10'000'000;
inline constexpr size_t kMaxLabelLineBytes = 64 << 10;

struct ValLabels {
  std::string format;  // "LOC_val_solution.csv" or "ILSVRC2012_validation_ground_truth.txt"
  std::vector<std::string> classes;                    // sorted synsets; label i is classes[i]
  absl::flat_hash_map<std::string, int32_t> by_image;  // file name without extension -> label
};

// The format is recognised from the content (the CSV's header line). The synset file's layout is
// told by its first line: one field is a wnid per line (line k is ID k), three are map_clsloc.txt
// ("wnid ID name", IDs in any order, unique, exactly 1..N); every line must follow the first.
// NotFound for a missing labels or synset file; InvalidArgument naming "FILE:LINE" for a malformed
// line, an ID the synset file lacks, an image labelled twice, a wnid or ID the synset file gives
// twice, and for the limits above; InvalidArgument for an empty file, a CSV without rows, synset
// IDs that are not 1..N, and a ground-truth file without `synsets_path` (the message gives the
// meta.mat export above). `synsets_path` is ignored for the CSV.
absl::StatusOr<ValLabels> ReadValLabels(const std::string& labels_path,
                                        const std::string& synsets_path);

// The images directly in `root` (torchvision's extensions, sorted by name in byte order;
// sub-folders are skipped, not looked into), each labelled by its name up to the last '.'. Labels
// for images the folder lacks are fine (a subset of val). Kind "imagenet-val"; `labels_path` only
// names the labels in messages. InvalidArgument naming the first image `labels` does not cover,
// `labels_path`, and how many such images there are; NotFound when `root` is missing or holds no
// image.
absl::StatusOr<SourceListing> ListLabeledFolder(const std::string& root, const ValLabels& labels,
                                                const std::string& labels_path);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_IMAGENET_LABELS_H_
