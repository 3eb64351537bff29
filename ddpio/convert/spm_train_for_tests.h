// Trains a small SentencePiece model for the token conversion tests (no Abseil here either:
// internal/spm_tokenizer.h says why). Test-only.
//
// CTest runs each test in a process of its own, each wants the model, and training took 86 s per
// process under ThreadSanitizer; so the model is trained once and kept in a cache folder:
//
//   std::string error = ddpio::testing::TrainSentencePiece(
//       dir.Sub("train.txt"), 800, DDPIO_TEST_CACHE_DIR, dir.Sub("spm.model"));
#ifndef DDPIO_CONVERT_SPM_TRAIN_FOR_TESTS_H_
#define DDPIO_CONVERT_SPM_TRAIN_FOR_TESTS_H_

#include <string>

namespace ddpio::testing {

// Writes to `model` a unigram model of `vocab_size` pieces trained on the text file `input`; ""
// on success, else why not.
//
// With a `cache_dir` (created if missing) the model comes from there when one was trained before
// on the same bytes, with the same options, by the same SentencePiece (version and library bytes);
// else it is trained and left there for the next process. Processes that want the same model at
// once wait for the first to train it (an flock, released even if that process dies). A cache file
// appears whole or not at all (written under another name, then renamed), and one that does not
// load as a model of `vocab_size` pieces is trained again. Without a cache folder, or when it
// cannot be written, the model is trained here every time.
std::string TrainSentencePiece(const std::string& input, int vocab_size,
                               const std::string& cache_dir, const std::string& model);

}  // namespace ddpio::testing

#endif  // DDPIO_CONVERT_SPM_TRAIN_FOR_TESTS_H_
