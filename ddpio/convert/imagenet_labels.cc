#include "ddpio/convert/imagenet_labels.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::convert {
namespace fs = std::filesystem;
namespace {

constexpr char kCsvHeader[] = "ImageId,PredictionString";
constexpr char kCsvFormat[] = "LOC_val_solution.csv";
constexpr char kGroundTruthFormat[] = "ILSVRC2012_validation_ground_truth.txt";
constexpr char kBom[] = "\xEF\xBB\xBF";
// A longer CSV ImageId cannot name a file (NAME_MAX), and the bound keeps by_image's keys small.
constexpr size_t kMaxImageIdBytes = 255;

// What the one-wnid-per-line synset file is made from (see ReadValLabels in the header).
constexpr char kMetaMatExport[] =
    "python3 -c \"import scipy.io; s = scipy.io.loadmat('meta.mat', squeeze_me=True)['synsets']; "
    "print('\\n'.join(x['WNID'] for x in sorted(s, key=lambda x: x['ILSVRC2012_ID']) "
    "if x['ILSVRC2012_ID'] <= 1000))\" > wnids.txt";

std::string Shown(std::string_view line) {
  return line.size() > 200 ? absl::StrCat(std::string(line.substr(0, 200)), "...")
                           : std::string(line);
}

absl::Status BadLine(const std::string& path, size_t line_no, const std::string& why,
                     const std::string& line) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d: %s, got '%s'", path, line_no, why, Shown(line)));
}

bool IsBlank(std::string_view line) { return line.find_first_not_of(" \t") == line.npos; }

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// A text file read one line at a time within the header's limits, so that neither a huge line nor
// a huge file is ever held whole: a '\r' before the '\n' and a UTF-8 BOM opening the file are
// dropped; blank lines are allowed only at the end of the file (editors and exports leave them).
class LineReader {
 public:
  // NotFound (or another errno code) when `path` cannot be opened; `what` names the file's role.
  static absl::StatusOr<LineReader> Open(const std::string& path, std::string_view what) {
    // A regular file only: a FIFO given as a label file would block the read forever.
    DDPIO_ASSIGN_OR_RETURN(Fd fd, OpenRegularFile(path, std::string(what)));
    std::unique_ptr<FILE, FileCloser> f(::fdopen(fd.get(), "rb"));
    if (f == nullptr) return ErrnoToStatus(errno, absl::StrCat(std::string(what), " ", path));
    fd.release();  // the FILE owns it now
    return LineReader(std::move(f), path);
  }

  // Sets `*line` to the next non-blank line and returns true, or returns false at the end of the
  // file. InvalidArgument "FILE:LINE" for an over-long line, too many lines, or a blank line that
  // is followed by text.
  absl::StatusOr<bool> Next(std::string* line) {
    size_t first_blank = 0;
    for (;;) {
      DDPIO_ASSIGN_OR_RETURN(bool got, ReadPhysical(line));
      if (!got) return false;
      if (IsBlank(*line)) {
        if (first_blank == 0) first_blank = line_no_;
        continue;
      }
      if (first_blank != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s:%d: a blank line before more text (line %d)", path_, first_blank, line_no_));
      }
      return true;
    }
  }

  size_t line_no() const { return line_no_; }  // of the line Next returned last
  const std::string& path() const { return path_; }

 private:
  LineReader(std::unique_ptr<FILE, FileCloser> file, std::string path)
      : file_(std::move(file)), path_(std::move(path)) {}

  absl::StatusOr<bool> ReadPhysical(std::string* line) {
    line->clear();
    int c = std::getc(file_.get());
    if (c == EOF) return CheckStream(false);
    if (++line_no_ > kMaxLabelLines) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:%d: more than %d lines", path_, line_no_, kMaxLabelLines));
    }
    for (; c != EOF && c != '\n'; c = std::getc(file_.get())) {
      if (line->size() >= kMaxLabelLineBytes) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s:%d: a line longer than %d bytes, starting '%s'", path_, line_no_,
                            kMaxLabelLineBytes, Shown(*line)));
      }
      line->push_back(static_cast<char>(c));
    }
    if (c == EOF) DDPIO_RETURN_IF_ERROR(CheckStream(true).status());
    if (!line->empty() && line->back() == '\r') line->pop_back();
    if (line_no_ == 1 && line->rfind(kBom, 0) == 0) line->erase(0, 3);
    return true;
  }

  // `result` unless the stream hit an error rather than the end of the file.
  absl::StatusOr<bool> CheckStream(bool result) {
    if (std::ferror(file_.get())) return ErrnoToStatus(errno, absl::StrCat("reading ", path_));
    return result;
  }

  std::unique_ptr<FILE, FileCloser> file_;
  std::string path_;
  size_t line_no_ = 0;
};

bool IsWnid(std::string_view s) {
  return s.size() == 9 && s[0] == 'n' &&
         std::all_of(s.begin() + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whitespace-separated fields.
std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while ((i = line.find_first_not_of(" \t", i)) != line.npos) {
    size_t end = std::min(line.find_first_of(" \t", i), line.size());
    out.push_back(line.substr(i, end - i));
    i = end;
  }
  return out;
}

// A positive decimal integer and nothing else.
bool ParseId(const std::string& text, int64_t* out) {
  auto [ptr, err] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return err == std::errc() && ptr == text.data() + text.size() && *out >= 1;
}

// A ground-truth line: one ILSVRC2012_ID.
bool ParseGroundTruthLine(const std::string& line, int64_t* id) {
  std::vector<std::string> f = Fields(line);
  return f.size() == 1 && ParseId(f[0], id);
}

// Renumbers `labels` (indices into `first_seen`) to positions in the sorted synsets.
void SortClasses(std::vector<std::string> first_seen, ValLabels* labels) {
  labels->classes = first_seen;
  std::sort(labels->classes.begin(), labels->classes.end());
  std::vector<int32_t> sorted_index(first_seen.size());
  for (size_t i = 0; i < first_seen.size(); ++i) {
    sorted_index[i] = static_cast<int32_t>(
        std::lower_bound(labels->classes.begin(), labels->classes.end(), first_seen[i]) -
        labels->classes.begin());
  }
  for (auto& [image, label] : labels->by_image) label = sorted_index[label];
}

// The rows of a LOC_val_solution.csv whose header `in` has just returned.
absl::StatusOr<ValLabels> ReadLocCsv(LineReader& in) {
  ValLabels out;
  out.format = kCsvFormat;
  absl::flat_hash_map<std::string, int32_t> index_of_wnid;
  std::vector<std::string> first_seen;
  std::string line;
  for (;;) {
    DDPIO_ASSIGN_OR_RETURN(bool got, in.Next(&line));
    if (!got) break;
    const size_t comma = line.find(',');
    const std::string image = comma == line.npos ? "" : line.substr(0, comma);
    const std::vector<std::string> predictions =
        comma == line.npos ? std::vector<std::string>() : Fields(line.substr(comma + 1));
    if (image.empty() || image.size() > kMaxImageIdBytes || predictions.empty() ||
        !IsWnid(predictions[0])) {
      return BadLine(in.path(), in.line_no(),
                     "expected 'ImageId,wnid x_min y_min x_max y_max ...' with a WordNet id "
                     "(n + 8 digits) first",
                     line);
    }
    auto [it, added] =
        index_of_wnid.try_emplace(predictions[0], static_cast<int32_t>(first_seen.size()));
    if (added) first_seen.push_back(predictions[0]);
    if (!out.by_image.try_emplace(image, it->second).second) {
      return BadLine(in.path(), in.line_no(), absl::StrCat("image ", image, " is labelled twice"),
                     line);
    }
  }
  if (out.by_image.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(in.path(), " has a header but no row"));
  }
  SortClasses(std::move(first_seen), &out);
  return out;
}

// One line of a synset file: its wnid and ID (the line number in the one-wnid-per-line layout).
// `fields` is the first line's number of fields, which chooses the layout: 1 or 3.
absl::Status ParseSynsetLine(const LineReader& in, const std::string& line, size_t fields,
                             std::string* wnid, int64_t* id) {
  std::vector<std::string> f = Fields(line);
  *id = static_cast<int64_t>(in.line_no());
  if ((fields == 1 || fields == 3) && f.size() == fields && IsWnid(f[0]) &&
      (fields == 1 || ParseId(f[1], id))) {
    *wnid = f[0];
    return absl::OkStatus();
  }
  std::string why = fields == 1   ? "expected one wnid (n + 8 digits) per line"
                    : fields == 3 ? "expected map_clsloc.txt's 'wnid ID name' (ID from 1)"
                                  : "expected one wnid (n + 8 digits) per line, or "
                                    "map_clsloc.txt's 'wnid ID name'";
  if (in.line_no() > 1 && (fields == 1 || fields == 3)) absl::StrAppend(&why, ", as on line 1");
  return BadLine(in.path(), in.line_no(), why, line);
}

// The devkit's ILSVRC2012_ID -> wnid, from one wnid per line or map_clsloc.txt ("wnid ID name"),
// told apart by the first line's number of fields. IDs are unique and exactly 1..N.
absl::StatusOr<absl::flat_hash_map<int64_t, std::string>> ReadSynsets(const std::string& path) {
  DDPIO_ASSIGN_OR_RETURN(LineReader in, LineReader::Open(path, "synset file"));
  absl::flat_hash_map<int64_t, std::string> by_id;
  absl::flat_hash_map<std::string, size_t> line_of_wnid;
  size_t fields = 0;
  std::string line, wnid;
  for (;;) {
    DDPIO_ASSIGN_OR_RETURN(bool got, in.Next(&line));
    if (!got) break;
    if (fields == 0) fields = Fields(line).size();
    int64_t id = 0;
    DDPIO_RETURN_IF_ERROR(ParseSynsetLine(in, line, fields, &wnid, &id));
    auto [seen, added] = line_of_wnid.try_emplace(wnid, in.line_no());
    if (!added) {
      return BadLine(path, in.line_no(),
                     absl::StrCat(wnid, " is listed twice (first on line ", seen->second, ")"),
                     line);
    }
    if (!by_id.try_emplace(id, wnid).second) {
      return BadLine(path, in.line_no(), absl::StrCat("ID ", id, " is given twice"), line);
    }
  }
  if (by_id.empty())
    return absl::InvalidArgumentError(absl::StrCat("synset file ", path, " is empty"));
  for (int64_t id = 1; id <= static_cast<int64_t>(by_id.size()); ++id) {
    if (!by_id.contains(id)) {
      return absl::InvalidArgumentError(absl::StrCat("synset file ", path, " lists ", by_id.size(),
                                                     " synsets but not ID ", id,
                                                     " (IDs must be 1 to the number of synsets)"));
    }
  }
  return by_id;
}

absl::Status NeedSynsets(const std::string& path) {
  return WithSetting(
      absl::InvalidArgumentError(absl::StrCat(
          path,
          " holds ILSVRC2012_IDs, which mean nothing without the devkit's ID order: give a synset "
          "file, either the devkit's map_clsloc.txt or one wnid per line in ID order, exported "
          "from the devkit's data/meta.mat with: ",
          kMetaMatExport)),
      "synsets");
}

// The ground truth whose first line `in` has just returned as `first`. Line i labels image
// ILSVRC2012_val_<i as 8 digits>: blank lines, which would shift the numbering, end the file.
absl::StatusOr<ValLabels> ReadGroundTruth(LineReader& in, std::string first,
                                          const std::string& synsets_path) {
  DDPIO_ASSIGN_OR_RETURN(auto by_id, ReadSynsets(synsets_path));
  ValLabels out;
  out.format = kGroundTruthFormat;
  std::vector<std::string> wnids(by_id.size());  // wnids[id - 1]: the label before sorting
  for (const auto& [id, wnid] : by_id) wnids[id - 1] = wnid;
  std::string line = std::move(first);
  bool got = true;
  while (got) {
    int64_t id = 0;
    if (!ParseGroundTruthLine(line, &id)) {
      return BadLine(in.path(), in.line_no(), "expected one ILSVRC2012_ID (a positive integer)",
                     line);
    }
    if (id > static_cast<int64_t>(wnids.size())) {
      return BadLine(
          in.path(), in.line_no(),
          absl::StrCat("ID ", id, " is not in ", synsets_path, " (IDs 1 to ", wnids.size(), ")"),
          line);
    }
    out.by_image[absl::StrFormat("ILSVRC2012_val_%08d", in.line_no())] =
        static_cast<int32_t>(id - 1);
    DDPIO_ASSIGN_OR_RETURN(got, in.Next(&line));
  }
  SortClasses(std::move(wnids), &out);
  return out;
}

}  // namespace

absl::StatusOr<ValLabels> ReadValLabels(const std::string& labels_path,
                                        const std::string& synsets_path) {
  DDPIO_ASSIGN_OR_RETURN(LineReader in, LineReader::Open(labels_path, "labels file"));
  std::string first;
  DDPIO_ASSIGN_OR_RETURN(bool got, in.Next(&first));
  if (!got)
    return absl::InvalidArgumentError(absl::StrCat("labels file ", labels_path, " is empty"));
  if (first == kCsvHeader) return ReadLocCsv(in);
  int64_t first_id = 0;
  if (!ParseGroundTruthLine(first, &first_id)) {  // neither format: say what was expected
    return BadLine(labels_path, in.line_no(),
                   absl::StrCat("expected ", kCsvFormat, "'s header '", kCsvHeader, "' or ",
                                kGroundTruthFormat, "'s first ILSVRC2012_ID"),
                   first);
  }
  if (synsets_path.empty()) return NeedSynsets(labels_path);
  return ReadGroundTruth(in, std::move(first), synsets_path);
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
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("no image file directly in ", root,
                                            " (extensions: .jpg .jpeg .png .ppm .bmp .pgm .tif "
                                            ".tiff .webp; sub-folders are not read)"));
  }
  std::sort(files.begin(), files.end());  // byte order
  SourceListing listing;
  listing.kind = "imagenet-val";
  listing.root = root;
  listing.described = root;
  listing.classes = labels.classes;
  std::string first_unlabelled;
  size_t unlabelled = 0;
  for (const std::string& name : files) {
    // HasImageExtension guarantees a '.'; the image id is what precedes the last one.
    auto it = labels.by_image.find(name.substr(0, name.rfind('.')));
    if (it == labels.by_image.end()) {
      if (unlabelled++ == 0) first_unlabelled = name;
      continue;
    }
    listing.entries.push_back({name, it->second});
  }
  if (unlabelled > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, " has no label for ", first_unlabelled, " in ", root, ": ", unlabelled,
        " of the ", files.size(), " images there have none (is it the right labels file?)"));
  }
  return listing;
}

}  // namespace ddpio::convert
