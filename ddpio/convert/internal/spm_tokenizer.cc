// No Abseil here: see spm_tokenizer.h.
#include "ddpio/convert/internal/spm_tokenizer.h"

#include <sentencepiece_processor.h>

namespace ddpio::convert::internal {

SpmTokenizer::SpmTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> p)
    : processor_(std::move(p)) {}

SpmTokenizer::~SpmTokenizer() = default;

std::unique_ptr<SpmTokenizer> SpmTokenizer::Load(const std::string& model, std::string* error) {
  auto p = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = p->LoadFromSerializedProto(model);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<SpmTokenizer>(new SpmTokenizer(std::move(p)));
}

bool SpmTokenizer::Encode(std::string_view text, std::vector<int>* ids, std::string* error) const {
  const auto status = processor_->Encode(text, ids);
  if (status.ok()) return true;
  *error = status.ToString();
  return false;
}

int SpmTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

int SpmTokenizer::eos_id() const { return processor_->eos_id(); }

}  // namespace ddpio::convert::internal
