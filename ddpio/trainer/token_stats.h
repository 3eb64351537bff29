// What the trainer learns of a token dataset's sequences before training a token model: the
// largest id (the vocabulary, for datasets that record none: converted from Megatron's files or
// a flat token file) and the unigram entropy of the labels — the loss of the best model that
// ignores context, which a next-token model must beat to have learnt anything from the context.
#ifndef DDPIO_TRAINER_TOKEN_STATS_H_
#define DDPIO_TRAINER_TOKEN_STATS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::trainer {

struct TokenStats {
  uint64_t labels = 0;         // ids counted
  uint64_t sequences = 0;      // sequences read
  uint32_t max_id = 0;         // the largest id read (inputs too)
  double unigram_entropy = 0;  // nats per id over the ids counted
  bool complete = false;       // every sequence was read
};

// Counts the labels (ids 1 .. seq_len of each window) of `sequences` (a token dataset read as
// packed sequences: storage/token_sequences.h), in record order, until at least `max_labels`
// are counted (0: all of them). The record errors of ReadTxn::Get — with `skip_bad`, a DataLoss
// record is passed over, as the loader's skip policy passes it; InvalidArgument for a reader
// whose records are not token sequences.
absl::StatusOr<TokenStats> CountTokenLabels(const storage::DatasetReader& sequences,
                                            uint64_t max_labels, bool skip_bad = false);

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_TOKEN_STATS_H_
