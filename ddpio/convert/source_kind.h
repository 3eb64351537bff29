// What a conversion reads, as an enum with the names users type (`ddpio convert --from NAME`,
// `ddpio.convert(..., source="NAME")`). Pure functions, thread-safe.
//
//   imagefolder  an ImageFolder tree (convert_sources.h), or with `val_labels` a flat folder of
//                ImageNet validation images (imagenet_labels.h)
//   list         a list file of "relative/path label" lines (Caffe style)
//   caffe-lmdb   a Caffe/DALI LMDB of Datum messages (caffe_lmdb.h)
//   dataset      a ddpio dataset, rewritten with the conversion's options (dataset_source.h)
// and, for language models, documents of token ids (token_sources.h):
//   jsonl        JSON lines, each document's text tokenized with SentencePiece
//   megatron     Megatron-LM's indexed dataset (PREFIX.bin / PREFIX.idx)
//   tokens       a flat file of token ids (raw or .npy), split into documents at EOS
#ifndef DDPIO_CONVERT_SOURCE_KIND_H_
#define DDPIO_CONVERT_SOURCE_KIND_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace ddpio::convert {

enum class SourceKind { kImageFolder, kList, kCaffeLmdb, kDataset, kJsonl, kMegatron, kTokens };

// Whether a conversion of this kind makes a token dataset (not images).
inline bool IsTokenSource(SourceKind kind) {
  return kind == SourceKind::kJsonl || kind == SourceKind::kMegatron || kind == SourceKind::kTokens;
}

// "imagefolder", "list", "caffe-lmdb", "dataset", "jsonl", "megatron" or "tokens".
std::string_view SourceKindName(SourceKind kind);

// The kind named `name` (exactly as SourceKindName spells it). InvalidArgument naming `name` and
// listing the valid names otherwise.
absl::StatusOr<SourceKind> ParseSourceKind(std::string_view name);

}  // namespace ddpio::convert

#endif  // DDPIO_CONVERT_SOURCE_KIND_H_
