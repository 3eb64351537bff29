#include "ddpio/convert/spm_train_for_tests.h"

#include <sentencepiece_trainer.h>

namespace ddpio::testing {

std::string TrainSentencePiece(const std::string& input, const std::string& prefix,
                               int vocab_size) {
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + input + " --model_prefix=" + prefix + " --vocab_size=" +
      std::to_string(vocab_size) + " --minloglevel=2 --num_threads=2 --input_sentence_size=200000");
  return status.ok() ? "" : status.ToString();
}

}  // namespace ddpio::testing
