// Weighted mixing of token datasets, each packed into sequences (token_packing.h):
//   - position n of an epoch takes its sequence from the source whose share lags its weight most
//     (argmax over d of weight_d * (n + 1) - taken_d, ties to the lower d; Megatron-LM's blending
//     rule weighs max(n, 1) instead of n + 1), so in every prefix of the stream each source's count
//     is within one or two of weight x length (tested);
//   - source d's j-th sequence of all time (epochs chain on) is sequence j % size_d of its pass
//     j / size_d, a pass being an epoch of that source's own packing, seeded with
//     seed + 1000003 * d + pass: a source asked for more than it holds starts a new shuffle of
//     itself, one asked for less continues next epoch where it stopped;
//   - an epoch has `sequences_per_epoch` positions (default: the sources' sequences added up).
// Everything is a function of (sources, weights, seq_len, seed, shuffle, epoch): the same on every
// world size. One source with weight 1 is plain packing (its pass is the epoch).
//
// Thread-compatible: one thread uses a TokenMixture (its plan cache changes on Fill).
#ifndef DDPIO_LOADER_TOKEN_MIXTURE_H_
#define DDPIO_LOADER_TOKEN_MIXTURE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/loader/token_packing.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::loader {

// Which source each of the first `n` positions takes, by the blending rule above. Weights are
// positive and finite; they are divided by the largest first, so their sum is finite too.
std::vector<uint32_t> BlendSources(absl::Span<const double> weights, uint64_t n);

class TokenMixture {
 public:
  struct Source {
    std::unique_ptr<storage::DatasetReader> reader;  // a token dataset
    double weight = 1;
  };

  // InvalidArgument for no source, a weight that is not positive and finite, a source that is
  // not a token dataset, a seq_len out of range or a source too short for one sequence.
  static absl::StatusOr<std::unique_ptr<TokenMixture>> Make(std::vector<Source> sources,
                                                            uint64_t seq_len, uint64_t seed,
                                                            bool shuffle,
                                                            uint64_t sequences_per_epoch = 0);

  uint64_t size() const { return per_epoch_; }  // positions in an epoch
  uint64_t seq_len() const { return seq_len_; }
  size_t sources() const { return sources_.size(); }
  uint64_t source_tokens(size_t d) const;
  uint64_t source_documents(size_t d) const;
  uint64_t source_sequences(size_t d) const;  // in one pass of source d
  const storage::DatasetReader& source_reader(size_t d) const { return *sources_[d].reader; }

  // Fills row r of `out` with position positions[r] of `epoch` and sets source[r] to its source.
  // Errors as FillTokenBatch.
  absl::Status Fill(uint64_t epoch, absl::Span<const uint64_t> positions,
                    absl::Span<const bool> valid, TokenBatchView* out, absl::Span<int64_t> source);

 private:
  struct SourceState {
    std::unique_ptr<storage::DatasetReader> reader;
    std::shared_ptr<const std::vector<uint32_t>> lengths;
    uint64_t sequences = 0;  // per pass
    uint64_t taken_per_epoch = 0;
    // Planned passes: all a batch uses while it is filled, the latest few between batches.
    std::map<uint64_t, std::unique_ptr<TokenPacking>> passes;
  };
  absl::StatusOr<const TokenPacking*> Pass(size_t d, uint64_t pass);

  uint64_t seq_len_ = 0, seed_ = 0, per_epoch_ = 0;
  bool shuffle_ = true;
  std::vector<SourceState> sources_;
  std::vector<uint32_t> source_of_;   // position -> source
  std::vector<uint64_t> ordinal_of_;  // position -> its sequence's place in its source's epoch
  std::vector<TokenRow> rows_;
  std::vector<TokenPacking::Span> spans_;
  CheckedDocuments checked_;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_TOKEN_MIXTURE_H_
