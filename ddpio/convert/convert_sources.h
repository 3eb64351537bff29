// What `ddpio convert` reads: an ImageFolder tree or a Caffe-style list file, turned into an
// ordered list of (relative path, label) entries.
//
// ImageFolder labels follow torchvision.datasets.ImageFolder exactly, so that sample i of a
// ddpio dataset is sample i of the ImageFolder a PyTorch user already has:
//   - classes are the sub-directories of the root (symlinks followed), sorted by name
//     (code-point order), label = position;
//   - within a class, os.walk(followlinks=True) order sorted by directory path, then files
//     sorted by name in each directory: sub-directories are included;
//   - a file is a sample when its lower-cased name ends in .jpg .jpeg .png .ppm .bmp .pgm .tif
//     .tiff or .webp (torchvision's IMG_EXTENSIONS); other files and files at the top level are
//     not samples. Non-JPEG images keep their index and fail (or are skipped) at conversion;
//   - no class folder, or a class without any sample, is an error as in torchvision.
// List files hold lines "relative/path label" (split at the last space, as Caffe's
// convert_imageset does); blank lines and lines starting with '#' are ignored; paths are
// relative to --root (default: the list file's directory).
#ifndef DDPIO_CONVERT_CONVERT_SOURCES_H_
#define DDPIO_CONVERT_CONVERT_SOURCES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::convert {

struct SourceEntry {
  std::string relative;  // path under SourceListing::root
  int32_t label = 0;
};

struct SourceListing {
  std::string kind;                  // "imagefolder" or "list"
  std::string root;                  // entries are root/relative
  std::string described;             // what the user named (the folder or the list file)
  std::vector<std::string> classes;  // label i is classes[i]
  std::vector<SourceEntry> entries;
};

// True when the lower-cased `name` ends in one of torchvision's IMG_EXTENSIONS.
bool HasImageExtension(std::string_view name);

// NotFound when `root` is missing or has no class folder; InvalidArgument when a class has no
// image file (naming the classes).
absl::StatusOr<SourceListing> ListImageFolder(const std::string& root);

// Labels of a list file are below this: every label up to the largest becomes a class, and a
// stray 2e9 must not build two billion class names. (ImageNet-21k has 21,841 classes.)
inline constexpr int kMaxListClasses = 1'000'000;
// The longest line a list file may have (a path up to PATH_MAX, a space, a label): a file that is
// one endless line is refused at this length instead of being read into memory.
inline constexpr size_t kMaxListLine = 8192;

// `root` empty: the list file's directory. InvalidArgument naming "FILE:LINE" for a malformed
// line or a label outside [0, kMaxListClasses); NotFound when the list file is missing. Classes
// are "0" to the largest label.
absl::StatusOr<SourceListing> ReadListFile(const std::string& list_path, const std::string& root);

// A digest of the listing (kind, classes, every entry in order) and `options`: what a resumed
// conversion must match.
std::string ListingFingerprint(const SourceListing& listing, std::string_view options);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_CONVERT_SOURCES_H_
