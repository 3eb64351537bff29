// SentencePiece behind a header of standard types only: sentencepiece_processor.h declares a
// namespace absl of its own (absl::string_view as std::string_view) that collides with Abseil's,
// so no file that includes Abseil may include it. Only spm_tokenizer.cc does.
// Thread-compatible: one SpmTokenizer per thread (token_sources.h keeps one per worker).
#ifndef DDPIO_CONVERT_INTERNAL_SPM_TOKENIZER_H_
#define DDPIO_CONVERT_INTERNAL_SPM_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace ddpio::convert::internal {

class SpmTokenizer {
 public:
  // The model from its serialized bytes (a .model file's content); null with *error set when they
  // are not a SentencePiece model.
  static std::unique_ptr<SpmTokenizer> Load(const std::string& model, std::string* error);
  ~SpmTokenizer();

  // `text`'s ids, as SentencePieceProcessor::Encode gives them. false with *error set on failure.
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const;
  int vocab_size() const;
  int eos_id() const;  // -1 when the model has none

 private:
  explicit SpmTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> p);
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace ddpio::convert::internal

#endif  // DDPIO_CONVERT_INTERNAL_SPM_TOKENIZER_H_
