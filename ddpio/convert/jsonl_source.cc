// JSON lines tokenized with SentencePiece: the jsonl document source (token_sources.h).
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/internal/json_parse.h"
#include "ddpio/common/regular_file.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/internal/spm_tokenizer.h"
#include "ddpio/convert/internal/token_file.h"
#include "ddpio/convert/token_sources.h"

namespace ddpio::convert {
namespace {

using internal::SpmTokenizer;
using internal::TokenFile;

constexpr uint64_t kScanBytes = uint64_t{16} << 20;
// The largest SentencePiece model read (the big multilingual ones are a few MB).
constexpr uint64_t kMaxModelBytes = uint64_t{1} << 30;

struct Line {
  uint32_t file = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;   // without the newline
  uint64_t number = 0;  // 1-based, as editors count
};

bool Blank(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t c) { return c == ' ' || c == '\t' || c == '\r'; });
}

// Every non-blank line of `file` (index `f`), appended to *lines.
absl::Status ListLines(const TokenFile& file, uint32_t f, std::vector<Line>* lines) {
  std::vector<uint8_t> buffer;
  uint64_t start = 0, number = 1;
  bool blank = true;  // the current line so far
  for (uint64_t at = 0; at < file.size(); at += kScanBytes) {
    const uint64_t n = std::min(kScanBytes, file.size() - at);
    DDPIO_RETURN_IF_ERROR(file.Read(at, n, &buffer));
    for (uint64_t k = 0; k < n; ++k) {
      const uint8_t c = buffer[k];
      if (c == '\n') {
        if (!blank) lines->push_back({f, start, at + k - start, number});
        start = at + k + 1;
        ++number;
        blank = true;
      } else if (blank && !Blank(&c, 1)) {
        blank = false;
      }
    }
  }
  if (!blank) lines->push_back({f, start, file.size() - start, number});
  return absl::OkStatus();
}

// A file, or the *.jsonl and *.json files under a folder sorted by path.
absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return std::vector<std::string>{path};
  std::vector<std::string> files;
  // Symlinked folders are not followed: a link to a parent or a sibling would convert the same
  // documents again (a link to a file is read as the file).
  for (auto it = std::filesystem::recursive_directory_iterator(
           path, std::filesystem::directory_options::none, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_regular_file(ec) &&
        (absl::EndsWith(name, ".jsonl") || absl::EndsWith(name, ".json"))) {
      files.push_back(it->path().string());
    }
  }
  if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("listing ", path));
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return absl::NotFoundError(
        absl::StrCat(path,
                     " holds no .jsonl or .json file: give a JSON lines file or a folder "
                     "of them"));
  }
  return files;
}

class JsonlSource : public DocumentSource {
 public:
  JsonlSource(std::string described, std::vector<TokenFile> files, std::vector<Line> lines,
              std::vector<std::unique_ptr<SpmTokenizer>> tokenizers, JsonlOptions options,
              int64_t eos_id, std::string model_digest)
      : described_(std::move(described)),
        files_(std::move(files)),
        lines_(std::move(lines)),
        tokenizers_(std::move(tokenizers)),
        options_(std::move(options)),
        eos_id_(eos_id),
        vocab_size_(static_cast<uint64_t>(tokenizers_.front()->vocab_size())),
        model_digest_(std::move(model_digest)) {
    for (const TokenFile& f : files_) {
      std::string name = std::filesystem::path(f.path()).lexically_relative(described_).string();
      names_.push_back(name.empty() || name == "." || absl::StartsWith(name, "..")
                           ? std::filesystem::path(f.path()).filename().string()
                           : name);
    }
  }

  uint64_t size() const override { return lines_.size(); }
  int width() const override { return vocab_size_ <= 65536 ? 2 : 4; }
  int64_t eos_id() const override { return eos_id_; }
  uint64_t vocab_size() const override { return vocab_size_; }
  std::string tokenizer() const override { return options_.tokenizer; }
  std::string kind() const override { return "jsonl"; }
  std::string described() const override { return described_; }
  std::string fingerprint() const override {
    std::string f = absl::StrCat("jsonl|model=", model_digest_, "|field=", options_.text_field,
                                 "|eos=", eos_id_);
    for (const TokenFile& file : files_) absl::StrAppend(&f, "|", file.identity());
    return f;
  }
  uint64_t source_files() const override { return files_.size(); }
  std::string Name(uint64_t i) const override {
    return absl::StrCat(names_[lines_[i].file], ":", lines_[i].number);
  }

  absl::Status Read(uint64_t i, int worker, std::vector<uint8_t>* payload) const override {
    const Line& line = lines_[i];
    if (line.bytes > kMaxJsonLineBytes) {
      return absl::DataLossError(absl::StrCat(Name(i), ": a line of ", line.bytes,
                                              " bytes; a document is at most ", kMaxJsonLineBytes));
    }
    std::vector<uint8_t> bytes;
    DDPIO_RETURN_IF_ERROR(files_[line.file].Read(line.offset, line.bytes, &bytes));
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    absl::StatusOr<nlohmann::json> j = ParseJson(text, Name(i), kMaxJsonLineBytes);
    if (!j.ok()) return absl::DataLossError(j.status().message());
    const auto field = j->is_object() ? j->find(options_.text_field) : j->end();
    if (!j->is_object() || field == j->end() || !field->is_string()) {
      return absl::DataLossError(
          absl::StrCat(Name(i), ": ", j->is_object() ? "no" : "not a JSON object, so no",
                       " string field '", options_.text_field, "' (the text field to tokenize)"));
    }
    std::vector<int> ids;
    const auto& processor = *tokenizers_[static_cast<size_t>(worker)];
    if (std::string error; !processor.Encode(field->get_ref<const std::string&>(), &ids, &error))
      return absl::DataLossError(absl::StrCat(Name(i), ": SentencePiece: ", error));
    if (eos_id_ >= 0) ids.push_back(static_cast<int>(eos_id_));
    payload->clear();
    payload->reserve(ids.size() * static_cast<size_t>(width()));
    for (int id : ids) internal::PutId(static_cast<uint32_t>(id), width(), payload);
    return absl::OkStatus();
  }

 private:
  const std::string described_;
  const std::vector<TokenFile> files_;
  const std::vector<Line> lines_;
  // One per worker: each Read uses its worker's.
  const std::vector<std::unique_ptr<SpmTokenizer>> tokenizers_;
  const JsonlOptions options_;
  const int64_t eos_id_;
  const uint64_t vocab_size_;
  const std::string model_digest_;
  std::vector<std::string> names_;  // each file as messages name it
};

}  // namespace

absl::StatusOr<std::unique_ptr<DocumentSource>> OpenJsonlSource(const std::string& path,
                                                                const JsonlOptions& options) {
  if (options.tokenizer.empty()) {
    return WithSetting(absl::InvalidArgumentError(absl::StrCat(
                           "JSON lines are tokenized: name the SentencePiece model (.model) to "
                           "tokenize ",
                           path, " with")),
                       "tokenizer");
  }
  if (options.text_field.empty())
    return absl::InvalidArgumentError("the text field to tokenize is empty");
  DDPIO_ASSIGN_OR_RETURN(std::string model,
                         ReadRegularFile(options.tokenizer, kMaxModelBytes, "SentencePiece model"));
  std::vector<std::unique_ptr<SpmTokenizer>> tokenizers;
  for (int w = 0; w < std::max(1, options.workers); ++w) {
    std::string error;
    std::unique_ptr<SpmTokenizer> p = SpmTokenizer::Load(model, &error);
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.tokenizer, " is not a SentencePiece model (", error, ")"));
    }
    tokenizers.push_back(std::move(p));
  }
  const int64_t vocab = tokenizers.front()->vocab_size();
  int64_t eos = options.eos_id == -2 ? tokenizers.front()->eos_id() : options.eos_id;
  if (eos < -1 || eos >= vocab) {
    return absl::InvalidArgumentError(absl::StrCat("the EOS id ", eos, " is not an id of ",
                                                   options.tokenizer, "'s vocabulary of ", vocab,
                                                   " pieces (or -1 for none)"));
  }
  DDPIO_ASSIGN_OR_RETURN(std::vector<std::string> paths, ListFiles(path));
  std::vector<TokenFile> files;
  std::vector<Line> lines;
  for (const std::string& p : paths) {
    DDPIO_ASSIGN_OR_RETURN(TokenFile file, TokenFile::Open(p, "JSON lines file"));
    DDPIO_RETURN_IF_ERROR(ListLines(file, static_cast<uint32_t>(files.size()), &lines));
    files.push_back(std::move(file));
  }
  const std::string digest = absl::StrCat(absl::Hex(Fnv1a64(model), absl::kZeroPad16));
  return std::make_unique<JsonlSource>(path, std::move(files), std::move(lines),
                                       std::move(tokenizers), options, eos, digest);
}

}  // namespace ddpio::convert
