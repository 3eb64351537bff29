#include "ddpio/loader/token_mixture.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::loader {
namespace {

// Passes of one source kept planned between batches: the next batch mostly needs the latest.
constexpr size_t kPassesKept = 3;
constexpr uint64_t kSourceSeedStride = 1000003;
// The plan of an epoch is 12 bytes a position: 2^30 positions are 12 GiB (of 8 Ki-token sequences,
// 8.8 T tokens an epoch).
constexpr uint64_t kMaxSequencesPerEpoch = uint64_t{1} << 30;

}  // namespace

std::vector<uint32_t> BlendSources(absl::Span<const double> weights, uint64_t n) {
  double largest = 0, total = 0;
  for (double w : weights) largest = std::max(largest, w);
  for (double w : weights) total += w / largest;
  std::vector<uint64_t> taken(weights.size(), 0);
  std::vector<uint32_t> out(n);
  for (uint64_t i = 0; i < n; ++i) {
    size_t best = 0;
    double best_error = -INFINITY;
    for (size_t d = 0; d < weights.size(); ++d) {
      const double error =
          weights[d] / largest / total * static_cast<double>(i + 1) - static_cast<double>(taken[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    out[i] = static_cast<uint32_t>(best);
    ++taken[best];
  }
  return out;
}

absl::StatusOr<std::unique_ptr<TokenMixture>> TokenMixture::Make(std::vector<Source> sources,
                                                                 uint64_t seq_len, uint64_t seed,
                                                                 bool shuffle,
                                                                 uint64_t sequences_per_epoch) {
  if (sources.empty()) return absl::InvalidArgumentError("a token mixture needs a source");
  if (sequences_per_epoch > kMaxSequencesPerEpoch) {
    return absl::InvalidArgumentError(absl::StrCat("sequences_per_epoch ", sequences_per_epoch,
                                                   " is over ", kMaxSequencesPerEpoch));
  }
  auto m = std::unique_ptr<TokenMixture>(new TokenMixture);
  m->seq_len_ = seq_len;
  m->seed_ = seed;
  m->shuffle_ = shuffle;
  std::vector<double> weights;
  uint64_t all = 0;
  for (size_t d = 0; d < sources.size(); ++d) {
    Source& s = sources[d];
    if (!(s.weight > 0) || !std::isfinite(s.weight)) {
      return WithSetting(
          absl::InvalidArgumentError(absl::StrCat("the weight of source ", d, " is ", s.weight,
                                                  ": weights are positive and finite")),
          "weights");
    }
    if (!storage::IsTokenDataset(s.reader->header())) {
      return absl::InvalidArgumentError(absl::StrCat(
          s.reader->path(), " is an image dataset: only token datasets are packed and mixed"));
    }
    SourceState st;
    DDPIO_ASSIGN_OR_RETURN(std::vector<uint32_t> lengths, storage::DocumentLengths(*s.reader));
    st.lengths = std::make_shared<const std::vector<uint32_t>>(std::move(lengths));
    st.reader = std::move(s.reader);
    DDPIO_ASSIGN_OR_RETURN(TokenPacking first,
                           TokenPacking::Make(st.lengths, seq_len, seed, 0, false));
    st.sequences = first.size();
    if (st.sequences == 0) {
      return absl::InvalidArgumentError(absl::StrCat(st.reader->path(), " holds ", first.tokens(),
                                                     " tokens: not one sequence of ", seq_len,
                                                     " (+1)"));
    }
    all += st.sequences;
    weights.push_back(s.weight);
    m->sources_.push_back(std::move(st));
  }
  m->per_epoch_ = sequences_per_epoch > 0 ? sequences_per_epoch : all;
  if (m->per_epoch_ > kMaxSequencesPerEpoch) {
    return absl::InvalidArgumentError(
        absl::StrCat(m->per_epoch_, " sequences an epoch: more than ", kMaxSequencesPerEpoch,
                     " (give sequences_per_epoch, or a longer seq_len)"));
  }
  m->source_of_ = BlendSources(weights, m->per_epoch_);
  m->ordinal_of_.resize(m->per_epoch_);
  for (uint64_t n = 0; n < m->per_epoch_; ++n)
    m->ordinal_of_[n] = m->sources_[m->source_of_[n]].taken_per_epoch++;
  return m;
}

uint64_t TokenMixture::source_tokens(size_t d) const {
  uint64_t t = 0;
  for (uint32_t l : *sources_[d].lengths) t += l;
  return t;
}
uint64_t TokenMixture::source_documents(size_t d) const { return sources_[d].lengths->size(); }
uint64_t TokenMixture::source_sequences(size_t d) const { return sources_[d].sequences; }

absl::StatusOr<const TokenPacking*> TokenMixture::Pass(size_t d, uint64_t pass) {
  SourceState& st = sources_[d];
  auto it = st.passes.find(pass);
  if (it != st.passes.end()) return it->second.get();
  DDPIO_ASSIGN_OR_RETURN(
      TokenPacking plan,
      TokenPacking::Make(st.lengths, seq_len_, seed_ + kSourceSeedStride * d, pass, shuffle_));
  auto made = st.passes.emplace(pass, std::make_unique<TokenPacking>(std::move(plan)));
  return made.first->second.get();
}

absl::Status TokenMixture::Fill(uint64_t epoch, absl::Span<const uint64_t> positions,
                                absl::Span<const bool> valid, TokenBatchView* out,
                                absl::Span<int64_t> source) {
  if (valid.size() != positions.size() || source.size() != positions.size()) {
    return absl::InvalidArgumentError(absl::StrCat(positions.size(), " positions, ", valid.size(),
                                                   " valid flags, ", source.size(), " sources"));
  }
  rows_.clear();
  for (size_t r = 0; r < positions.size(); ++r) {
    const uint64_t n = positions[r];
    if (n >= per_epoch_) {
      return absl::InvalidArgumentError(
          absl::StrCat("position ", n, " of an epoch of ", per_epoch_, " sequences"));
    }
    const size_t d = source_of_[n];
    const SourceState& st = sources_[d];
    const uint64_t j = epoch * st.taken_per_epoch + ordinal_of_[n];
    DDPIO_ASSIGN_OR_RETURN(const TokenPacking* plan, Pass(d, j / st.sequences));
    rows_.push_back({st.reader.get(), plan, j % st.sequences, valid[r]});
    source[r] = static_cast<int64_t>(d);
  }
  absl::Status filled = FillTokenBatch(rows_, seq_len_, out, &spans_, &checked_);
  // The rows are filled: keep each source's latest passes planned (a small source weighted far
  // above its size may have used many in one batch).
  for (SourceState& st : sources_) {
    while (st.passes.size() > kPassesKept) st.passes.erase(st.passes.begin());
  }
  return filled;
}

}  // namespace ddpio::loader
