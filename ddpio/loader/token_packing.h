// Packing a token dataset's documents into fixed-length sequences, Megatron-LM's GPTDataset
// convention:
//   - an epoch's documents in order — shuffled as torch.randperm(D, generator seeded with
//     seed + epoch) orders them, or as stored with shuffle off — concatenated into one stream;
//   - sequence k is the stream's window [kS, kS + S] (S + 1 ids): `tokens` its first S, `labels`
//     its last S. An epoch has (T - 1) / S sequences (T ids in all): every id is a label once,
//     and the last ids that do not fill a sequence wait for no one (as Megatron drops them).
// A sequence's content depends on (lengths, S, seed, epoch, shuffle) only — never on the world
// size or the rank that reads it — so sequences are split between ranks like any samples
// (exactly once per epoch, resumable on another world size; the sampler's business).
//
// The plan of an epoch is the document order and its prefix sums: 12 bytes a document, O(D) to
// build (a million documents in milliseconds: docs/PERFORMANCE.md, "Tokens"), and sequence k's
// documents are found by binary search. Immutable after Make: thread-safe to share.
//
// TokenBatchFiller turns a batch of sequence numbers into arrays (Fill), reading the documents'
// ids from the dataset and checking each record's length against the plan's.
#ifndef DDPIO_LOADER_TOKEN_PACKING_H_
#define DDPIO_LOADER_TOKEN_PACKING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/token_sequences.h"

namespace ddpio::loader {

class TokenPacking : public storage::SequencePlan {
 public:
  // One document's ids [begin, end) in a sequence's window.
  using Span = storage::DocumentPiece;

  // The plan of `epoch` over documents of `lengths` ids. InvalidArgument for seq_len 0 or over
  // 2^24 (a sequence of 16 Mi tokens is no training sequence).
  static absl::StatusOr<TokenPacking> Make(std::shared_ptr<const std::vector<uint32_t>> lengths,
                                           uint64_t seq_len, uint64_t seed, uint64_t epoch,
                                           bool shuffle);

  uint64_t size() const override { return sequences_; }  // sequences in the epoch
  uint64_t seq_len() const override { return seq_len_; }
  uint64_t tokens() const { return prefix_.back(); }
  const std::vector<uint32_t>& lengths() const { return *lengths_; }
  uint64_t documents(size_t) const override { return lengths_->size(); }
  uint32_t length(size_t, uint64_t document) const override { return (*lengths_)[document]; }

  // Sequence k's window (seq_len + 1 ids) as document spans in stream order, into *out
  // (replaced). k < size().
  void Spans(uint64_t k, std::vector<Span>* out) const;
  void Pieces(uint64_t k, std::vector<Span>* out) const override { Spans(k, out); }

 private:
  TokenPacking() = default;
  std::shared_ptr<const std::vector<uint32_t>> lengths_;
  uint64_t seq_len_ = 0;
  uint64_t sequences_ = 0;
  std::vector<uint32_t> order_;   // stream position -> document
  std::vector<uint64_t> prefix_;  // ids before stream position p; D + 1 entries
};

// The arrays of a batch of `batch` sequences of S ids each, row-major [batch, S] unless said.
struct TokenBatchView {
  absl::Span<int64_t> tokens;        // the window's first S ids
  absl::Span<int64_t> labels;        // its last S (the next id of each)
  absl::Span<int64_t> position_ids;  // 0 at the sequence's start and at each document start
  absl::Span<int64_t> document_ids;  // 0, 1, ...: which of the sequence's documents
  absl::Span<float> loss_mask;       // 1, and 0 for a sequence marked invalid (padding)
  // Variable-length attention's boundaries over the batch's batch * S tokens flattened (flash
  // attention's cu_seqlens): 0, then the end of each document piece; batch * S + 1 entries at most,
  // `cu_count` of them written.
  absl::Span<int32_t> cu_seqlens;
  uint64_t cu_count = 0;
  int32_t max_seqlen = 0;  // the longest piece
};

// One row of a batch: sequence `sequence` of `plan` over `reader`'s documents.
struct TokenRow {
  const storage::DatasetReader* reader = nullptr;
  const TokenPacking* plan = nullptr;
  uint64_t sequence = 0;
  bool valid = true;  // false: its loss_mask row 0 (a padding sample)
};

// The documents whose checksums a filler checked last: a long document spans many sequences, and
// is checked once for them, not once for each (its CRC covers the whole record).
class CheckedDocuments {
 public:
  bool Contains(const storage::DatasetReader* reader, uint64_t document) const;
  void Add(const storage::DatasetReader* reader, uint64_t document);

 private:
  static constexpr size_t kKept = 64;
  std::vector<std::pair<const storage::DatasetReader*, uint64_t>> kept_;
  size_t next_ = 0;
};

// Fills row r of `out` with rows[r] (every plan of seq_len S). Every span's record is read, and
// checksummed (with its binding) unless `checked` holds it — so readers may be opened without
// verify_checksums; a record whose length is not the plan's, or whose type is not its dataset's,
// is DataLoss naming it. InvalidArgument when `out`'s spans are not sized for rows.size() rows of
// S, or a sequence is past its plan's. `spans` is scratch.
absl::Status FillTokenBatch(absl::Span<const TokenRow> rows, uint64_t seq_len, TokenBatchView* out,
                            std::vector<TokenPacking::Span>* spans, CheckedDocuments* checked);

class TokenBatchFiller {
 public:
  // `reader` must outlive the filler and be a token dataset's; `plan` its documents' packing.
  TokenBatchFiller(const storage::DatasetReader* reader, const TokenPacking* plan);

  // Fills row r of `out` with sequence sequences[r] (valid[r] false: its loss_mask row 0, as for
  // a padding sample). Every span's record is read and checksummed; a record whose length is not
  // the plan's is DataLoss naming it (the recorded lengths lie). InvalidArgument when `out`'s
  // spans are not sized for sequences.size() rows of S. Thread-compatible: one filler per thread.
  absl::Status Fill(absl::Span<const uint64_t> sequences, absl::Span<const bool> valid,
                    TokenBatchView* out);

 private:
  const storage::DatasetReader* reader_;
  const TokenPacking* plan_;
  std::vector<TokenPacking::Span> spans_;
  std::vector<TokenRow> rows_;
  CheckedDocuments checked_;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_TOKEN_PACKING_H_
