// Trains a small SentencePiece model for the token conversion tests (no Abseil here either:
// internal/spm_tokenizer.h says why). Test-only.
#ifndef DDPIO_CONVERT_SPM_TRAIN_FOR_TESTS_H_
#define DDPIO_CONVERT_SPM_TRAIN_FOR_TESTS_H_

#include <string>

namespace ddpio::testing {

// Trains a unigram model of `vocab_size` pieces on the text file `input` into `prefix`.model;
// "" on success, else SentencePiece's error.
std::string TrainSentencePiece(const std::string& input, const std::string& prefix, int vocab_size);

}  // namespace ddpio::testing

#endif  // DDPIO_CONVERT_SPM_TRAIN_FOR_TESTS_H_
