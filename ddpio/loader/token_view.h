// Token datasets as the pipeline reads them: packed sequences (storage/token_sequences.h), of one
// dataset or a weighted mixture of several, fixed for a run — record k of the view is what
// Python's token Loader gives at position k of epoch 0 with the same settings:
//   - one dataset: its documents ordered as torch.randperm seeded with the seed (or as stored)
//     and windowed into sequences of seq_len + 1 ids (TokenPacking's epoch 0);
//   - a mixture "A:0.7,B:0.3": as many positions as the sources' sequences added up, position n
//     taking source d by the blending rule of token_mixture.h (BlendSources), source d's j-th
//     sequence being sequence j % size_d of its pass j / size_d, seeded with
//     seed + 1000003 * d + pass.
// The sampler then shuffles the view's sequences per epoch like any samples.
#ifndef DDPIO_LOADER_TOKEN_VIEW_H_
#define DDPIO_LOADER_TOKEN_VIEW_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/token_sequences.h"

namespace ddpio::loader {

// A dataset of a view and its weight.
struct TokenSourceSpec {
  std::string path;
  double weight = 1;
};

// "PATH" (one dataset, taken as it is) or "A:0.7,B:0.3" (a weighted mixture: sources separated by
// commas, each PATH:WEIGHT or PATH for weight 1; a weight is a positive finite number). `weighted`
// is set for a mixture.
// InvalidArgument naming `data` for an empty source, a bad weight, or a dataset in an object
// store within a mixture (not supported yet).
absl::StatusOr<std::vector<TokenSourceSpec>> ParseTokenSources(const std::string& data,
                                                               bool* weighted);

// The view of `sources` as packed sequences of view.seq_len ids (view.weights: the mixture's, one
// per source, or empty for one dataset). Each document is checksummed once per transaction that
// reads it (options.verify_checksums); the documents' lengths are read at open (recorded; else
// every record is read). Errors as DatasetReader::Open's; InvalidArgument naming `seq_len` for an
// image dataset or a seq_len out of range, or naming `data` for a source too short for one
// sequence or weights that are not one per source.
absl::StatusOr<std::unique_ptr<storage::DatasetReader>> OpenPackedSequences(
    const std::vector<std::string>& paths, storage::ReaderOptions options,
    const storage::SequenceView& view);

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_TOKEN_VIEW_H_
