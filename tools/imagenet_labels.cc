#include "tools/imagenet_labels.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::tools {
namespace fs = std::filesystem;
namespace {

constexpr char kCsvHeader[] = "ImageId,PredictionString";

// The lines of a text file: '\r' and a leading UTF-8 BOM stripped; lines longer than
// kMaxLabelLineBytes and files of more than kMaxLabelLines lines refused.
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, absl::StrCat("labels file ", path));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > kMaxLabelLineBytes) {
      return absl::InvalidArgumentError(absl::StrFormat("%s:%d: a line longer than %d bytes", path,
                                                        lines.size() + 1, kMaxLabelLineBytes));
    }
    if (lines.size() >= kMaxLabelLines) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": more than ", kMaxLabelLines, " lines"));
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lines.empty() && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    lines.push_back(std::move(line));
  }
  if (in.bad()) return ErrnoToStatus(errno, absl::StrCat("reading ", path));
  while (!lines.empty() && lines.back().find_first_not_of(" \t") == std::string::npos)
    lines.pop_back();
  return lines;
}

std::string Shown(const std::string& line) {
  return line.size() > 120 ? line.substr(0, 120) + "..." : line;
}

absl::Status BadLine(const std::string& path, size_t line_no, const std::string& why,
                     const std::string& line) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d: %s, got '%s'", path, line_no, why, Shown(line)));
}

bool IsWnid(std::string_view s) {
  return s.size() == 9 && s[0] == 'n' &&
         std::all_of(s.begin() + 1, s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool ParseId(const std::string& text, int64_t* out) {
  auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return err == std::errc() && ptr == text.data() + text.size();
}

// Labels are positions in the sorted synsets.
void AssignLabels(const std::map<std::string, std::string>& wnid_of_image, ValLabels* out) {
  for (const auto& [image, wnid] : wnid_of_image) out->classes.push_back(wnid);
  std::sort(out->classes.begin(), out->classes.end());
  out->classes.erase(std::unique(out->classes.begin(), out->classes.end()), out->classes.end());
}

absl::StatusOr<ValLabels> ReadLocCsv(const std::string& path,
                                     const std::vector<std::string>& lines) {
  std::map<std::string, std::string> wnid_of;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const size_t comma = line.find(',');
    const std::string image = comma == std::string::npos ? "" : line.substr(0, comma);
    const std::vector<std::string> predictions =
        comma == std::string::npos ? std::vector<std::string>() : Fields(line.substr(comma + 1));
    if (image.empty() || predictions.empty() || !IsWnid(predictions[0])) {
      return BadLine(path, i + 1,
                     "expected 'ImageId,wnid x y x y ...' with a WordNet id (n + 8 digits)", line);
    }
    if (!wnid_of.emplace(image, predictions[0]).second) {
      return BadLine(path, i + 1, absl::StrCat("image ", image, " is labelled twice"), line);
    }
  }
  ValLabels out;
  out.format = "LOC_val_solution.csv";
  AssignLabels(wnid_of, &out);
  for (const auto& [image, wnid] : wnid_of) {
    out.by_image[image] = static_cast<int32_t>(
        std::lower_bound(out.classes.begin(), out.classes.end(), wnid) - out.classes.begin());
  }
  return out;
}

// The devkit's ILSVRC2012_ID -> wnid, from map_clsloc.txt ("wnid ID name") or one wnid per line.
absl::StatusOr<std::map<int64_t, std::string>> ReadSynsets(const std::string& path) {
  DDPIO_ASSIGN_OR_RETURN(std::vector<std::string> lines, ReadLines(path));
  std::map<int64_t, std::string> by_id;
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<std::string> f = Fields(lines[i]);
    int64_t id = static_cast<int64_t>(i) + 1;
    if (f.empty() || !IsWnid(f[0]) || (f.size() >= 2 && (!ParseId(f[1], &id) || id < 1))) {
      return BadLine(path, i + 1, "expected a wnid per line, or map_clsloc.txt's 'wnid ID name'",
                     lines[i]);
    }
    if (!seen.emplace(f[0], i + 1).second) {
      return BadLine(path, i + 1,
                     absl::StrCat(f[0], " is listed twice (first on line ", seen[f[0]], ")"),
                     lines[i]);
    }
    if (!by_id.emplace(id, f[0]).second)
      return BadLine(path, i + 1, absl::StrCat("ID ", id, " is given twice"), lines[i]);
  }
  if (by_id.empty())
    return absl::InvalidArgumentError(absl::StrCat("synset file ", path, " lists no synset"));
  return by_id;
}

absl::StatusOr<ValLabels> ReadGroundTruth(const std::string& path,
                                          const std::vector<std::string>& lines,
                                          const std::string& synsets_path) {
  if (synsets_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " holds ILSVRC2012_IDs, which need the devkit's ID order: pass --synsets with "
        "map_clsloc.txt, or a "
        "file of one wnid per line in ID order (from the devkit's data/meta.mat: python3 -c "
        "\"import scipy.io; "
        "s = scipy.io.loadmat('meta.mat')['synsets']; print('\\n'.join(str(x[0][1][0]) for x in "
        "sorted(s, key=lambda x: int(x[0][0][0][0])) if int(x[0][0][0][0]) <= 1000))\")"));
  }
  DDPIO_ASSIGN_OR_RETURN(auto by_id, ReadSynsets(synsets_path));
  ValLabels out;
  out.format = "ILSVRC2012_validation_ground_truth.txt";
  for (const auto& [id, wnid] : by_id) out.classes.push_back(wnid);
  std::sort(out.classes.begin(), out.classes.end());
  for (size_t i = 0; i < lines.size(); ++i) {
    int64_t id = 0;
    const std::vector<std::string> f = Fields(lines[i]);
    if (f.size() != 1 || !ParseId(f[0], &id))
      return BadLine(path, i + 1, "expected one ILSVRC2012_ID", lines[i]);
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      return BadLine(path, i + 1, absl::StrCat("ID ", id, " is not in ", synsets_path), lines[i]);
    }
    out.by_image[absl::StrFormat("ILSVRC2012_val_%08d", i + 1)] = static_cast<int32_t>(
        std::lower_bound(out.classes.begin(), out.classes.end(), it->second) - out.classes.begin());
  }
  return out;
}

}  // namespace

absl::StatusOr<ValLabels> ReadValLabels(const std::string& labels_path,
                                        const std::string& synsets_path) {
  DDPIO_ASSIGN_OR_RETURN(std::vector<std::string> lines, ReadLines(labels_path));
  if (lines.empty())
    return absl::InvalidArgumentError(absl::StrCat("labels file ", labels_path, " is empty"));
  if (lines[0] == kCsvHeader) return ReadLocCsv(labels_path, lines);
  return ReadGroundTruth(labels_path, lines, synsets_path);
}

absl::StatusOr<SourceListing> ListLabeledFolder(const std::string& root, const ValLabels& labels,
                                                const std::string& labels_path) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(
        absl::StrCat("validation folder ", root, " does not exist or is not a directory"));
  }
  std::vector<std::string> files;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code dir_ec;
    if (it->is_directory(dir_ec)) continue;
    std::string name = it->path().filename().string();
    if (HasImageExtension(name)) files.push_back(std::move(name));
  }
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("listing ", root));
  if (files.empty()) return absl::NotFoundError(absl::StrCat("no image file directly in ", root));
  std::sort(files.begin(), files.end());
  SourceListing listing;
  listing.kind = "imagenet-val";
  listing.root = root;
  listing.described = root;
  listing.classes = labels.classes;
  std::string first_missing;
  size_t missing = 0;
  for (const std::string& name : files) {
    auto it = labels.by_image.find(name.substr(0, name.rfind('.')));
    if (it == labels.by_image.end()) {
      if (missing++ == 0) first_missing = name;
      continue;
    }
    listing.entries.push_back({name, it->second});
  }
  if (missing > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, " has no label for ", first_missing, " of ", root,
                     missing > 1 ? absl::StrCat(" (nor for ", missing - 1, " more)") : ""));
  }
  return listing;
}

}  // namespace ddpio::tools
