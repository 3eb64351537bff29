// ImageNet validation label files (LOC_val_solution.csv, the devkit's ground truth and synset
// files): the input is written to a file and read as labels, and as a synset file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "tools/imagenet_labels.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/imagenet_labels_fuzz.XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
  const std::string input = dir + "/input", synsets = dir + "/synsets";
  FILE* f = std::fopen(input.c_str(), "wb");
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  f = std::fopen(synsets.c_str(), "wb");
  std::fputs("n02119789 1 kit_fox\nn02100735 2 English_setter\nn01440764 3 tench\n", f);
  std::fclose(f);
  auto labels = ddpio::tools::ReadValLabels(input, synsets);
  if (labels.ok()) {
    for (const auto& [image, label] : labels->by_image) {
      if (label < 0 || static_cast<size_t>(label) >= labels->classes.size()) __builtin_trap();
    }
  }
  (void)ddpio::tools::ReadValLabels(synsets, input);  // the input as a synset file
  return 0;
}
