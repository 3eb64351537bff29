#include "ddpio/loader/token_view.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/token_mixture.h"
#include "ddpio/loader/token_packing.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::loader {
namespace {

// Source d's pass p is seeded with seed + kStride * d (and epoch p): as TokenMixture's.
constexpr uint64_t kStride = 1000003;

// The mixture's positions over its sources' passes (see token_view.h).
class MixturePlan : public storage::SequencePlan {
 public:
  static absl::StatusOr<std::shared_ptr<const MixturePlan>> Make(
      std::vector<std::shared_ptr<const std::vector<uint32_t>>> lengths,
      const std::vector<double>& weights, uint64_t seq_len, uint64_t seed, bool shuffle,
      const std::vector<std::string>& paths) {
    auto plan = std::shared_ptr<MixturePlan>(new MixturePlan());
    plan->seq_len_ = seq_len;
    plan->lengths_ = std::move(lengths);
    const size_t n = plan->lengths_.size();
    plan->passes_.resize(n);
    uint64_t positions = 0;
    for (size_t d = 0; d < n; ++d) {
      DDPIO_ASSIGN_OR_RETURN(
          TokenPacking first,
          TokenPacking::Make(plan->lengths_[d], seq_len, seed + kStride * d, 0, shuffle));
      if (first.size() == 0) {
        return WithSetting(absl::InvalidArgumentError(absl::StrCat(
                               paths[d], " holds ", first.tokens(),
                               " token ids: too few for one sequence of ", seq_len + 1)),
                           "data");
      }
      plan->sizes_.push_back(first.size());
      positions += first.size();
      plan->passes_[d].push_back(std::make_unique<TokenPacking>(std::move(first)));
    }
    plan->source_of_ = BlendSources(weights, positions);
    plan->ordinal_.resize(positions);
    std::vector<uint64_t> taken(n, 0);
    for (uint64_t k = 0; k < positions; ++k) plan->ordinal_[k] = taken[plan->source_of_[k]]++;
    for (size_t d = 0; d < n; ++d) {
      const uint64_t passes = (taken[d] + plan->sizes_[d] - 1) / plan->sizes_[d];
      for (uint64_t p = 1; p < passes; ++p) {
        DDPIO_ASSIGN_OR_RETURN(
            TokenPacking pass,
            TokenPacking::Make(plan->lengths_[d], seq_len, seed + kStride * d, p, shuffle));
        plan->passes_[d].push_back(std::make_unique<TokenPacking>(std::move(pass)));
      }
    }
    return plan;
  }

  uint64_t size() const override { return source_of_.size(); }
  uint64_t seq_len() const override { return seq_len_; }
  size_t sources() const override { return lengths_.size(); }
  uint64_t documents(size_t source) const override { return lengths_[source]->size(); }
  uint32_t length(size_t source, uint64_t document) const override {
    return (*lengths_[source])[document];
  }
  void Pieces(uint64_t k, std::vector<storage::DocumentPiece>* out) const override {
    const uint32_t d = source_of_[k];
    const uint64_t j = ordinal_[k];
    passes_[d][j / sizes_[d]]->Spans(j % sizes_[d], out);
    for (storage::DocumentPiece& piece : *out) piece.source = d;
  }

 private:
  MixturePlan() = default;
  uint64_t seq_len_ = 0;
  std::vector<std::shared_ptr<const std::vector<uint32_t>>> lengths_;
  std::vector<uint64_t> sizes_;  // sequences in one pass of each source
  std::vector<std::vector<std::unique_ptr<TokenPacking>>> passes_;
  std::vector<uint32_t> source_of_;  // position -> source
  std::vector<uint64_t> ordinal_;    // position -> its place among its source's
};

absl::Status BadData(const std::string& data, const std::string& why) {
  return WithSetting(absl::InvalidArgumentError(absl::StrCat(
                         "data \"", data, "\": ", why,
                         " (a mixture of token datasets is PATH:WEIGHT,PATH:WEIGHT,...)")),
                     "data");
}

}  // namespace

absl::StatusOr<std::vector<TokenSourceSpec>> ParseTokenSources(const std::string& data,
                                                               bool* weighted) {
  *weighted = false;
  std::vector<TokenSourceSpec> specs;
  if (data.find(',') == std::string::npos) return std::vector<TokenSourceSpec>{{data, 1}};
  const std::vector<std::string> parts = absl::StrSplit(data, ',');
  for (const std::string& part : parts) {
    TokenSourceSpec spec{part, 1};
    const size_t colon = part.rfind(':');
    double w = 0;
    if (colon != std::string::npos && absl::SimpleAtod(part.substr(colon + 1), &w)) {
      if (!(w > 0) || !std::isfinite(w)) {
        return BadData(
            data, absl::StrCat("weight ", part.substr(colon + 1), " of ", part.substr(0, colon),
                               " is not a positive finite number"));
      }
      spec = {part.substr(0, colon), w};
    }
    if (spec.path.empty()) return BadData(data, "a source names no dataset");
    specs.push_back(std::move(spec));
  }
  *weighted = true;
  {
    for (const TokenSourceSpec& s : specs) {
      if (storage::s3::IsS3Url(s.path)) {
        return BadData(data, absl::StrCat(s.path,
                                          " is in an object store: a mixture takes local "
                                          "datasets only (one dataset may be s3://)"));
      }
    }
  }
  return specs;
}

absl::StatusOr<std::unique_ptr<storage::DatasetReader>> OpenPackedSequences(
    const std::vector<std::string>& paths, storage::ReaderOptions options,
    const storage::SequenceView& view) {
  if (paths.empty() || (!view.weights.empty() && view.weights.size() != paths.size())) {
    return WithSetting(absl::InvalidArgumentError(absl::StrCat(paths.size(), " token datasets and ",
                                                               view.weights.size(), " weights")),
                       "data");
  }
  const bool verify = options.verify_checksums;
  options.verify_checksums = false;  // the view checks each document once, not per sequence
  std::vector<std::unique_ptr<storage::DatasetReader>> documents;
  std::vector<std::shared_ptr<const std::vector<uint32_t>>> lengths;
  for (const std::string& path : paths) {
    DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<storage::DatasetReader> reader,
                           storage::DatasetReader::Open(path, options));
    if (!storage::IsTokenDataset(reader->header())) {
      return WithSetting(
          absl::InvalidArgumentError(absl::StrCat(
              path, " is an image dataset: seq_len is for a token dataset (leave it at 0)")),
          "seq_len");
    }
    DDPIO_ASSIGN_OR_RETURN(std::vector<uint32_t> l, storage::DocumentLengths(*reader));
    lengths.push_back(std::make_shared<const std::vector<uint32_t>>(std::move(l)));
    documents.push_back(std::move(reader));
  }
  std::shared_ptr<const storage::SequencePlan> plan;
  if (view.weights.empty()) {
    DDPIO_ASSIGN_OR_RETURN(
        TokenPacking packing,
        TokenPacking::Make(lengths.front(), view.seq_len, view.seed, /*epoch=*/0, view.shuffle));
    if (packing.size() == 0) {
      return WithSetting(absl::InvalidArgumentError(
                             absl::StrCat(paths.front(), " holds ", packing.tokens(),
                                          " token ids: too few for one sequence of ",
                                          view.seq_len + 1, " (seq_len ", view.seq_len, " + 1)")),
                         "seq_len");
    }
    plan = std::make_shared<const TokenPacking>(std::move(packing));
  } else {
    DDPIO_ASSIGN_OR_RETURN(plan, MixturePlan::Make(std::move(lengths), view.weights, view.seq_len,
                                                   view.seed, view.shuffle, paths));
  }
  return storage::OpenSequences(std::move(documents), std::move(plan), view, verify);
}

}  // namespace ddpio::loader
