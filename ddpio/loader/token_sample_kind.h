// TokenSampleKind: the loader's kind of sample for a token dataset read as packed sequences
// (storage/token_sequences.h, OpenPackedSequences in token_packing.h), chosen by
// LoaderOptions::seq_len > 0. A sample is one sequence's window of seq_len + 1 ids as uint32,
// little-endian: sample_bytes = (seq_len + 1) * 4. Its first seq_len ids are the model's input,
// its last seq_len the labels (id j + 1 follows id j). A record that is not a window of
// seq_len + 1 token ids is DataLoss (the loader's bad-sample policy applies); a skipped one is all
// zero bytes. Stage time: collate (the widening copy).
//
// Thread-safety: as SampleKind (the kind is immutable; one worker per thread).
#ifndef DDPIO_LOADER_TOKEN_SAMPLE_KIND_H_
#define DDPIO_LOADER_TOKEN_SAMPLE_KIND_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "ddpio/loader/sample_kind.h"

namespace ddpio::loader {

class TokenSampleKind : public SampleKind {
 public:
  // InvalidArgument for seq_len 0 or over 2^24.
  static absl::StatusOr<std::unique_ptr<TokenSampleKind>> Create(uint64_t seq_len);

  size_t sample_bytes() const override { return (seq_len_ + 1) * sizeof(uint32_t); }
  std::unique_ptr<SampleWorker> NewWorker() const override;
  uint64_t seq_len() const { return seq_len_; }

 private:
  explicit TokenSampleKind(uint64_t seq_len) : seq_len_(seq_len) {}
  uint64_t seq_len_;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_TOKEN_SAMPLE_KIND_H_
