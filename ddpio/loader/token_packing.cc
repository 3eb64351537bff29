#include "ddpio/loader/token_packing.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/sampler/permutation.h"

namespace ddpio::loader {

inline constexpr uint64_t kMaxSeqLen = uint64_t{1} << 24;

absl::StatusOr<TokenPacking> TokenPacking::Make(
    std::shared_ptr<const std::vector<uint32_t>> lengths, uint64_t seq_len, uint64_t seed,
    uint64_t epoch, bool shuffle) {
  if (seq_len == 0 || seq_len > kMaxSeqLen) {
    return WithSetting(absl::InvalidArgumentError(absl::StrCat("seq_len must be from 1 to ",
                                                               kMaxSeqLen, ", not ", seq_len)),
                       "seq_len");
  }
  TokenPacking p;
  p.lengths_ = std::move(lengths);
  p.seq_len_ = seq_len;
  const uint64_t d = p.lengths_->size();
  if (d > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(d, " documents: packing takes at most 2^32 - 1 documents"));
  }
  p.order_.resize(d);
  if (shuffle) {
    sampler::TorchRandperm<uint32_t>(d, seed + epoch, /*legacy=*/false, p.order_.data());
  } else {
    for (uint64_t i = 0; i < d; ++i) p.order_[i] = static_cast<uint32_t>(i);
  }
  p.prefix_.resize(d + 1);
  p.prefix_[0] = 0;
  for (uint64_t i = 0; i < d; ++i) p.prefix_[i + 1] = p.prefix_[i] + (*p.lengths_)[p.order_[i]];
  const uint64_t total = p.prefix_.back();
  p.sequences_ = total > 0 ? (total - 1) / seq_len : 0;
  return p;
}

void TokenPacking::Spans(uint64_t k, std::vector<Span>* out) const {
  out->clear();
  uint64_t at = k * seq_len_;
  const uint64_t end = at + seq_len_ + 1;
  // The stream position whose document holds id `at`: the last p with prefix_[p] <= at (the
  // documents of no ids before it are passed over).
  uint64_t p = static_cast<uint64_t>(std::upper_bound(prefix_.begin(), prefix_.end(), at) -
                                     prefix_.begin()) -
               1;
  while (at < end) {
    const uint64_t doc_begin = prefix_[p], doc_end = prefix_[p + 1];
    if (doc_end > at) {
      const uint64_t stop = std::min(doc_end, end);
      out->push_back({order_[p], static_cast<uint32_t>(at - doc_begin),
                      static_cast<uint32_t>(stop - doc_begin)});
      at = stop;
    }
    ++p;
  }
}

namespace {

// `n` ids of `width` bytes (little-endian, as stored) into int64s.
void CopyIds(const uint8_t* in, uint64_t n, int width, int64_t* out) {
  if (width == 2) {
    for (uint64_t i = 0; i < n; ++i) out[i] = uint16_t(in[2 * i] | in[2 * i + 1] << 8);
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t v;
      std::memcpy(&v, in + 4 * i, 4);  // little-endian host (x86-64, aarch64 as run)
      out[i] = v;
    }
  }
}

}  // namespace

TokenBatchFiller::TokenBatchFiller(const storage::DatasetReader* reader, const TokenPacking* plan)
    : reader_(reader), plan_(plan) {}

absl::Status TokenBatchFiller::Fill(absl::Span<const uint64_t> sequences,
                                    absl::Span<const bool> valid, TokenBatchView* out) {
  if (valid.size() != sequences.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(sequences.size(), " sequences but ", valid.size(), " valid flags"));
  }
  rows_.clear();
  for (size_t r = 0; r < sequences.size(); ++r)
    rows_.push_back({reader_, plan_, sequences[r], valid[r]});
  return FillTokenBatch(rows_, plan_->seq_len(), out, &spans_, &checked_);
}

bool CheckedDocuments::Contains(const storage::DatasetReader* reader, uint64_t document) const {
  for (const auto& [r, d] : kept_) {
    if (d == document && r == reader) return true;
  }
  return false;
}

void CheckedDocuments::Add(const storage::DatasetReader* reader, uint64_t document) {
  if (kept_.size() < kKept) {
    kept_.emplace_back(reader, document);
  } else {
    kept_[next_] = {reader, document};
    next_ = (next_ + 1) % kKept;
  }
}

absl::Status FillTokenBatch(absl::Span<const TokenRow> rows_in, uint64_t s, TokenBatchView* out,
                            std::vector<TokenPacking::Span>* spans, CheckedDocuments* checked) {
  const uint64_t rows = rows_in.size(), cells = rows * s;
  if (out->tokens.size() != cells || out->labels.size() != cells ||
      out->position_ids.size() != cells || out->document_ids.size() != cells ||
      out->loss_mask.size() != cells || out->cu_seqlens.size() < cells + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("token batch arrays not sized for ", rows, " sequences of ", s, " ids"));
  }
  if (cells > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", rows, " sequences of ", s,
                     " ids is over 2^31 tokens (cu_seqlens are int32)"));
  }
  uint64_t cu = 0;
  out->cu_seqlens[cu++] = 0;
  out->max_seqlen = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    const TokenRow& row = rows_in[r];
    const TokenPacking& plan = *row.plan;
    if (plan.seq_len() != s || row.sequence >= plan.size()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", row.sequence, " of an epoch of ",
                                                     plan.size(), " sequences of ",
                                                     plan.seq_len()));
    }
    const int width = row.reader->header().tokens.width;
    DDPIO_ASSIGN_OR_RETURN(storage::ReadTxn txn, row.reader->BeginRead());
    plan.Spans(row.sequence, spans);
    uint64_t col = 0;  // position in the window, 0 .. s
    int64_t doc = 0;
    for (const TokenPacking::Span& span : *spans) {
      absl::Span<const uint8_t> stored;
      storage::RecordBinding binding;
      DDPIO_ASSIGN_OR_RETURN(storage::RecordView view, txn.Get(span.document, &stored, &binding));
      if (!checked->Contains(row.reader, span.document)) {
        storage::RecordView again;
        if (absl::Status crc = storage::DecodeRecord(stored, true, &again, &binding); !crc.ok()) {
          return Annotate(crc,
                          absl::StrCat("document ", span.document, " of ", row.reader->path()));
        }
        checked->Add(row.reader, span.document);
      }
      const uint64_t ids = view.payload.size() / static_cast<size_t>(width);
      if (storage::TokenWidth(view.type) != width || ids != plan.lengths()[span.document]) {
        return absl::DataLossError(
            absl::StrCat("document ", span.document, " of ", row.reader->path(), " holds ", ids,
                         " ids of ", storage::ContentTypeName(view.type),
                         " but the dataset's lengths say ", plan.lengths()[span.document]));
      }
      // The span is window positions [col, col + n): tokens take those below s, labels those
      // from 1 on (label c is position c + 1).
      const uint64_t n = span.end - span.begin;
      const uint8_t* first = view.payload.data() + uint64_t{span.begin} * width;
      if (col < s) {
        const uint64_t k = std::min(n, s - col), cell = r * s + col;
        CopyIds(first, k, width, &out->tokens[cell]);
        // A piece that starts mid-document (the sequence's first) counts from the sequence's
        // start; every document start counts from 0.
        for (uint64_t i = 0; i < k; ++i) out->position_ids[cell + i] = static_cast<int64_t>(i);
        std::fill_n(&out->document_ids[cell], k, doc);
        std::fill_n(&out->loss_mask[cell], k, row.valid ? 1.0f : 0.0f);
      }
      const uint64_t first_label = std::max<uint64_t>(col, 1);
      if (col + n > first_label) {
        CopyIds(first + (first_label - col) * width, col + n - first_label, width,
                &out->labels[r * s + first_label - 1]);
      }
      col += n;
      // The piece's tokens within the first s of the window: a boundary for varlen attention.
      const uint64_t boundary = r * s + std::min<uint64_t>(col, s);
      if (boundary > static_cast<uint64_t>(out->cu_seqlens[cu - 1])) {
        out->max_seqlen = std::max<int32_t>(
            out->max_seqlen, static_cast<int32_t>(boundary - out->cu_seqlens[cu - 1]));
        out->cu_seqlens[cu++] = static_cast<int32_t>(boundary);
      }
      ++doc;
      txn.Reset();
    }
  }
  out->cu_count = cu;
  return absl::OkStatus();
}

}  // namespace ddpio::loader
