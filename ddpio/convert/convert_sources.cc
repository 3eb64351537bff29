#include "ddpio/convert/convert_sources.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/checksum.h"

namespace ddpio::convert {
namespace fs = std::filesystem;
bool HasImageExtension(std::string_view name) {
  static const char* kExtensions[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                      ".pgm", ".tif",  ".tiff", ".webp"};
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* ext : kExtensions) {
    std::string e(ext);
    if (lower.size() >= e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0) {
      return true;
    }
  }
  return false;
}

namespace {

// Every directory under root/rel (itself included), following symlinks, relative to root;
// guards against symlink cycles.
absl::Status CollectDirs(const fs::path& root, const std::string& rel,
                         std::set<std::pair<dev_t, ino_t>>* seen, std::vector<std::string>* out) {
  struct stat st;
  fs::path abs = root / rel;
  if (::stat(abs.c_str(), &st) != 0) return ErrnoToStatus(errno, abs.string());
  if (!seen->insert({st.st_dev, st.st_ino}).second) return absl::OkStatus();  // cycle
  out->push_back(rel);
  std::error_code ec;
  for (auto it = fs::directory_iterator(abs, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code dir_ec;
    if (it->is_directory(dir_ec)) {  // follows symlinks, like os.walk(followlinks=True)
      DDPIO_RETURN_IF_ERROR(
          CollectDirs(root, absl::StrCat(rel, "/", it->path().filename().string()), seen, out));
    }
  }
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("listing ", abs.string()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SourceListing> ListImageFolder(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(
        absl::StrCat("source folder ", root, " does not exist or is not a directory"));
  }
  SourceListing listing;
  listing.kind = "imagefolder";
  listing.root = root;
  listing.described = root;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code dir_ec;
    if (it->is_directory(dir_ec)) listing.classes.push_back(it->path().filename().string());
  }
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("listing ", root));
  if (listing.classes.empty()) {
    return absl::NotFoundError(absl::StrCat("no class folder in ", root,
                                            " (an ImageFolder has one sub-folder per class)"));
  }
  std::sort(listing.classes.begin(), listing.classes.end());  // byte order = code-point order
  std::vector<std::string> empty_classes;
  for (size_t label = 0; label < listing.classes.size(); ++label) {
    std::vector<std::string> dirs;
    std::set<std::pair<dev_t, ino_t>> seen;
    DDPIO_RETURN_IF_ERROR(CollectDirs(root, listing.classes[label], &seen, &dirs));
    std::sort(dirs.begin(), dirs.end());
    size_t before = listing.entries.size();
    for (const std::string& dir : dirs) {
      std::vector<std::string> files;
      for (auto it = fs::directory_iterator(fs::path(root) / dir, ec);
           !ec && it != fs::directory_iterator(); it.increment(ec)) {
        std::error_code dir_ec;
        if (it->is_directory(dir_ec)) continue;
        std::string name = it->path().filename().string();
        if (HasImageExtension(name)) files.push_back(name);
      }
      if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("listing ", root, "/", dir));
      std::sort(files.begin(), files.end());
      for (auto& f : files) {
        listing.entries.push_back({absl::StrCat(dir, "/", f), static_cast<int32_t>(label)});
      }
    }
    if (listing.entries.size() == before) empty_classes.push_back(listing.classes[label]);
  }
  if (!empty_classes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no image file in class folder(s) ", absl::StrJoin(empty_classes, ", "), " of ", root,
        " (extensions: .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp)"));
  }
  return listing;
}

absl::StatusOr<SourceListing> ReadListFile(const std::string& list_path, const std::string& root) {
  // A regular file only (a FIFO would block the read forever); then read as a stream of lines.
  DDPIO_RETURN_IF_ERROR(OpenRegularFile(list_path, "list file").status());
  std::ifstream in(list_path);
  if (!in) return ErrnoToStatus(errno, absl::StrCat("list file ", list_path));
  SourceListing listing;
  listing.kind = "list";
  listing.described = list_path;
  fs::path base = root.empty() ? fs::path(list_path).parent_path() : fs::path(root);
  listing.root = (base.empty() ? fs::path(".") : base).string();
  std::vector<char> buf(kMaxListLine + 2);  // the line, its '\r', and the terminating NUL
  int32_t max_label = -1;
  for (int line_no = 1;; ++line_no) {
    // istream::getline stops at the buffer's end and sets failbit: a line never grows past it.
    in.getline(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = in.gcount();
    if (in.bad()) break;
    if (in.fail() && !in.eof()) {  // the buffer filled before the line ended
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:%d: a line longer than %d bytes (starts '%s...')", list_path, line_no,
                          kMaxListLine, std::string(buf.data(), 200)));
    }
    if (got == 0 && in.eof()) break;  // nothing after the last newline
    // gcount counts the newline getline consumed but did not store; a NUL stays part of the line.
    std::string line(buf.data(), static_cast<size_t>(got) - (in.eof() ? 0 : 1));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    size_t space = line.find_last_of(' ');
    std::string path = space == std::string::npos ? "" : line.substr(0, space);
    std::string label_text = space == std::string::npos ? "" : line.substr(space + 1);
    int64_t label = -1;
    auto [ptr, err] =
        std::from_chars(label_text.data(), label_text.data() + label_text.size(), label);
    if (path.empty() || label_text.empty() || err != std::errc() ||
        ptr != label_text.data() + label_text.size() || label < 0 || label >= kMaxListClasses) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: expected 'relative/path label' with a label in [0, %d), got '%s'", list_path,
          line_no, kMaxListClasses, line.size() > 200 ? line.substr(0, 200) + "..." : line));
    }
    listing.entries.push_back({path, static_cast<int32_t>(label)});
    max_label = std::max(max_label, static_cast<int32_t>(label));
  }
  if (in.bad()) return ErrnoToStatus(errno, absl::StrCat("reading ", list_path));
  if (listing.entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("list file ", list_path, " has no entries"));
  }
  for (int32_t c = 0; c <= max_label; ++c) listing.classes.push_back(std::to_string(c));
  return listing;
}

std::string ListingFingerprint(const SourceListing& listing, std::string_view options) {
  // Two independent 32-bit CRCs (different seeds and orders) and the counts: collisions between
  // two listings that someone actually resumes across are not a practical concern.
  uint32_t a = 0, b = 0x5bd1e995;
  auto feed = [&](std::string_view s) {
    a = storage::Crc32c(s.data(), s.size(), a);
    a = storage::Crc32c("\n", 1, a);
    b = storage::Crc32c("\n", 1, b);
    b = storage::Crc32c(s.data(), s.size(), b);
  };
  feed(listing.kind);
  feed(options);
  for (const auto& c : listing.classes) feed(c);
  for (const auto& e : listing.entries) {
    feed(e.relative);
    feed(std::to_string(e.label));
  }
  return absl::StrFormat("%08x%08x-%d-%d", a, b, listing.classes.size(), listing.entries.size());
}

}  // namespace ddpio::convert
