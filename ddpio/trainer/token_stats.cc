#include "ddpio/trainer/token_stats.h"

#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::trainer {

absl::StatusOr<TokenStats> CountTokenLabels(const storage::DatasetReader& sequences,
                                            uint64_t max_labels, bool skip_bad) {
  if (!storage::IsTokenDataset(sequences.header())) {
    return absl::InvalidArgumentError(
        absl::StrCat(sequences.path(), " is an image dataset: it has no token labels"));
  }
  TokenStats stats;
  std::unordered_map<uint32_t, uint64_t> counts;
  DDPIO_ASSIGN_OR_RETURN(storage::ReadTxn txn, sequences.BeginRead());
  for (uint64_t k = 0; k < sequences.size(); ++k) {
    if (max_labels != 0 && stats.labels >= max_labels) break;
    absl::StatusOr<storage::RecordView> got = txn.Get(k);
    if (skip_bad && absl::IsDataLoss(got.status())) {
      txn.Reset();
      continue;
    }
    DDPIO_ASSIGN_OR_RETURN(storage::RecordView view, std::move(got));
    const int width = storage::TokenWidth(view.type);
    if (width == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("record ", k, " of ", sequences.path(), " is not a token sequence"));
    }
    const size_t n = view.payload.size() / static_cast<size_t>(width);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = storage::TokenAt(view.payload, width, i);
      stats.max_id = std::max(stats.max_id, id);  // an input too: the window's first id
      if (i == 0) continue;
      ++counts[id];
      ++stats.labels;
    }
    ++stats.sequences;
    txn.Reset();
  }
  stats.complete = stats.sequences == sequences.size();
  double h = 0;
  for (const auto& [id, c] : counts) {
    const double p = static_cast<double>(c) / static_cast<double>(stats.labels);
    h -= p * std::log(p);
  }
  stats.unigram_entropy = h;
  return stats;
}

}  // namespace ddpio::trainer
