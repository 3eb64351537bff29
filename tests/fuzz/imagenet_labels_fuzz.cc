// ImageNet validation label files (LOC_val_solution.csv, the devkit's ground truth and its synset
// files, as `ddpio convert --val-labels/--synsets` reads them): the input is written to a file and
// read as labels with a fixed map_clsloc.txt, then as the synset file of a fixed ground truth.
// Whatever is accepted must hold labels that index its sorted, unique classes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ddpio/convert/imagenet_labels.h"
#include "tests/fuzz/scratch.h"

namespace {

bool WriteFile(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

void CheckLabels(const absl::StatusOr<ddpio::convert::ValLabels>& labels) {
  if (!labels.ok()) return;
  const auto& classes = labels->classes;
  if (std::adjacent_find(classes.begin(), classes.end(),
                         [](const std::string& a, const std::string& b) { return a >= b; }) !=
      classes.end()) {
    __builtin_trap();  // not sorted and unique
  }
  for (const auto& [image, label] : labels->by_image) {
    if (label < 0 || static_cast<size_t>(label) >= classes.size()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ddpio::fuzz::Scratch scratch("imagenet");
  static const std::string input = scratch.Path("input"), synsets = scratch.Path("synsets"),
                           ground_truth = scratch.Path("gt");
  static const bool fixed_files_written = [] {
    const std::string map = "n02119789 1 kit_fox\nn02100735 2 English_setter\nn01440764 3 tench\n";
    const std::string gt = "3\n1\n2\n";
    return WriteFile(synsets, map.data(), map.size()) &&
           WriteFile(ground_truth, gt.data(), gt.size());
  }();
  if (!fixed_files_written || !WriteFile(input, data, size)) return 0;
  CheckLabels(ddpio::convert::ReadValLabels(input, synsets));
  CheckLabels(ddpio::convert::ReadValLabels(ground_truth, input));  // the input as a synset file
  return 0;
}
