#include "ddpio/convert/source_kind.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddpio::convert {
namespace {

constexpr std::pair<SourceKind, std::string_view> kNames[] = {
    {SourceKind::kImageFolder, "imagefolder"},
    {SourceKind::kList, "list"},
    {SourceKind::kCaffeLmdb, "caffe-lmdb"},
    {SourceKind::kDataset, "dataset"},
    {SourceKind::kJsonl, "jsonl"},
    {SourceKind::kMegatron, "megatron"},
    {SourceKind::kTokens, "tokens"},
};

}  // namespace

std::string_view SourceKindName(SourceKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

absl::StatusOr<SourceKind> ParseSourceKind(std::string_view name) {
  std::string valid;
  for (const auto& [kind, known] : kNames) {
    if (known == name) return kind;
    absl::StrAppend(&valid, valid.empty() ? "" : ", ", std::string(known));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown source kind '", std::string(name), "': one of ", valid));
}

}  // namespace ddpio::convert
