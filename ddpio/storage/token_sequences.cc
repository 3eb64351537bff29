#include "ddpio/storage/token_sequences.h"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/internal/record_store.h"

namespace ddpio::storage {
namespace {

using internal::RecordStore;
using internal::RecordStoreTxn;
using internal::StoredRecord;

// The documents a transaction checked last: a document spans the sequences around it, and is
// checked once for them (its CRC covers the whole record), not once for each.
class CheckedDocuments {
 public:
  bool Contains(uint32_t source, uint64_t document) const {
    return std::find(kept_.begin(), kept_.end(), std::make_pair(source, document)) != kept_.end();
  }
  void Add(uint32_t source, uint64_t document) {
    if (kept_.size() < kKept) {
      kept_.emplace_back(source, document);
    } else {
      kept_[next_] = {source, document};
      next_ = (next_ + 1) % kKept;
    }
  }

 private:
  static constexpr size_t kKept = 64;
  std::vector<std::pair<uint32_t, uint64_t>> kept_;
  size_t next_ = 0;
};

class SequenceStore : public RecordStore {
 public:
  SequenceStore(std::vector<std::unique_ptr<DatasetReader>> documents,
                std::shared_ptr<const SequencePlan> plan, const DatasetHeader& header, bool verify)
      : documents_(std::move(documents)),
        plan_(std::move(plan)),
        path_(absl::StrCat(documents_.front()->path(), documents_.size() > 1 ? " and others" : "",
                           " (sequences of ", plan_->seq_len(), " ids)")),
        salt_(RecordSalt(header)),
        width_(header.tokens.width),
        verify_(verify) {
    for (const auto& d : documents_) file_bytes_ += d->file_bytes();
  }

  const std::string& path() const override { return path_; }
  bool no_lock() const override { return documents_.front()->no_lock(); }
  std::vector<DatasetReader::DataFile> data_files() const override {
    std::vector<DatasetReader::DataFile> files;
    for (const auto& d : documents_) {
      for (auto& f : d->data_files()) files.push_back(std::move(f));
    }
    return files;
  }
  uint64_t file_bytes() const override { return file_bytes_; }
  size_t shard_count() const override { return documents_.front()->shard_count(); }
  const remote::RemoteDataset* remote() const override { return documents_.front()->remote(); }
  bool fetches_copies() const override { return false; }
  absl::Status CheckLocatable() const override {
    return absl::UnimplementedError(
        absl::StrCat(path_,
                     ": sequences are made from the documents when read, not stored: locate the "
                     "documents' records instead"));
  }
  absl::StatusOr<std::unique_ptr<RecordStoreTxn>> BeginRead() const override;

  const DatasetReader& documents(size_t source) const { return *documents_[source]; }
  size_t sources() const { return documents_.size(); }
  const SequencePlan& plan() const { return *plan_; }
  uint64_t salt() const { return salt_; }
  int width() const { return width_; }
  bool verify() const { return verify_; }

 private:
  std::vector<std::unique_ptr<DatasetReader>> documents_;
  std::shared_ptr<const SequencePlan> plan_;
  std::string path_;
  uint64_t salt_;
  int width_;
  bool verify_;
  uint64_t file_bytes_ = 0;
};

class SequenceStoreTxn : public RecordStoreTxn {
 public:
  SequenceStoreTxn(const SequenceStore& store, std::vector<ReadTxn> txns)
      : store_(store), txns_(std::move(txns)) {}

  absl::StatusOr<StoredRecord> Read(uint64_t index) override {
    const SequencePlan& plan = store_.plan();
    const int width = store_.width();
    plan.Pieces(index, &pieces_);
    ids_.clear();
    for (const DocumentPiece& piece : pieces_) {
      if (piece.source >= txns_.size()) {
        return absl::InternalError(absl::StrCat("sequence ", index, " of ", store_.path(),
                                                " names source ", piece.source));
      }
      ReadTxn& txn = txns_[piece.source];
      const DatasetReader& documents = store_.documents(piece.source);
      absl::Span<const uint8_t> stored;
      RecordBinding binding;
      DDPIO_ASSIGN_OR_RETURN(RecordView view, txn.Get(piece.document, &stored, &binding));
      if (store_.verify() && !checked_.Contains(piece.source, piece.document)) {
        RecordView again;
        if (absl::Status crc = DecodeRecord(stored, true, &again, &binding); !crc.ok()) {
          return Annotate(crc, internal::RecordName(piece.document, documents.path()));
        }
        checked_.Add(piece.source, piece.document);
      }
      const int stored_width = TokenWidth(view.type);
      const uint64_t ids =
          stored_width == 0 ? 0 : view.payload.size() / static_cast<size_t>(stored_width);
      const uint32_t length = plan.length(piece.source, piece.document);
      if (stored_width == 0 || stored_width > width ||
          stored_width != documents.header().tokens.width || ids != length || piece.end > ids ||
          piece.begin > piece.end) {
        return absl::DataLossError(absl::StrCat(
            internal::RecordName(piece.document, documents.path()), " holds ", ids, " ids of ",
            ContentTypeName(view.type), " but the dataset's lengths say ", length));
      }
      for (uint32_t i = piece.begin; i < piece.end; ++i) {
        const uint32_t id = TokenAt(view.payload, stored_width, i);
        for (int b = 0; b < width; ++b) ids_.push_back(static_cast<uint8_t>(id >> (8 * b)));
      }
    }
    // The ids were copied out of the maps: a page lost meanwhile read as zeros.
    for (ReadTxn& txn : txns_) {
      DDPIO_RETURN_IF_ERROR(txn.CheckMapped());
      txn.Reset();
    }
    if (ids_.size() != (plan.seq_len() + 1) * width) {
      return absl::DataLossError(absl::StrCat("sequence ", index, " of ", store_.path(), " has ",
                                              ids_.size() / width, " ids, not ",
                                              plan.seq_len() + 1));
    }
    RecordView record;
    record.type = TokenType(width);
    record.payload = ids_;
    // A sequence comes from one source (a mixture takes each from one source's pass): its label.
    record.label = pieces_.empty() ? 0 : static_cast<int32_t>(pieces_.front().source);
    const RecordBinding binding{store_.salt(), index, true};
    std::string& bytes = made_.emplace_back();
    DDPIO_RETURN_IF_ERROR(EncodeRecord(record, &bytes, &binding));
    StoredRecord out;
    out.bytes = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    out.binding = binding;
    out.index = index;
    out.dataset = &store_.path();
    return out;
  }
  absl::Status Finish(uint64_t, absl::Status status) override { return status; }
  absl::Status CheckMapped() const override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> Prefetch(absl::Span<const uint64_t> indices) override {
    wanted_.assign(txns_.size(), {});
    for (uint64_t k : indices) {
      store_.plan().Pieces(k, &pieces_);
      for (const DocumentPiece& p : pieces_) {
        if (p.source < wanted_.size()) wanted_[p.source].push_back(p.document);
      }
    }
    uint64_t bytes = 0;
    for (size_t s = 0; s < txns_.size(); ++s) {
      std::vector<uint64_t>& w = wanted_[s];
      std::sort(w.begin(), w.end());
      w.erase(std::unique(w.begin(), w.end()), w.end());
      if (w.empty()) continue;
      DDPIO_ASSIGN_OR_RETURN(uint64_t hinted, txns_[s].Prefetch(w));
      bytes += hinted;
    }
    return bytes;
  }
  absl::StatusOr<remote::RecordLocation> Locate(uint64_t, absl::Span<const uint8_t>) override {
    return store_.CheckLocatable();
  }
  void Reset() override {
    made_.clear();
    for (ReadTxn& txn : txns_) txn.Reset();
  }

 private:
  const SequenceStore& store_;
  std::vector<ReadTxn> txns_;  // one per source
  std::vector<DocumentPiece> pieces_;
  std::vector<uint8_t> ids_;
  std::vector<std::vector<uint64_t>> wanted_;
  // The records made since the last Reset: views of them live until then.
  std::deque<std::string> made_;
  CheckedDocuments checked_;
};

absl::StatusOr<std::unique_ptr<RecordStoreTxn>> SequenceStore::BeginRead() const {
  std::vector<ReadTxn> txns;
  for (const auto& d : documents_) {
    DDPIO_ASSIGN_OR_RETURN(ReadTxn txn, d->BeginRead());
    txns.push_back(std::move(txn));
  }
  return std::make_unique<SequenceStoreTxn>(*this, std::move(txns));
}

}  // namespace

std::pair<DatasetHeader, DatasetCompletion> SequencesOf(const std::vector<SequenceSource>& sources,
                                                        const SequenceView& view) {
  DatasetHeader h = sources.empty() ? DatasetHeader{} : sources.front().header;
  absl::StrAppend(
      &h.source_fingerprint, " | sequences of ", view.seq_len, " ids, documents ",
      view.shuffle ? absl::StrCat("shuffled with seed ", view.seed) : std::string("in order"));
  DatasetCompletion c;
  int width = 0;
  bool vocab_unknown = false;  // a source that records none: the view records none either
  for (size_t s = 0; s < sources.size(); ++s) {
    const SequenceSource& source = sources[s];
    width = std::max(width, source.header.tokens.width);
    const uint64_t w = std::max(source.header.tokens.width, 1);
    const uint64_t tokens = source.completion.payload_bytes / w;
    c.sample_count += tokens > 0 && view.seq_len > 0 ? (tokens - 1) / view.seq_len : 0;
    c.skipped += source.completion.skipped;
    h.tokens.vocab_size = std::max(h.tokens.vocab_size, source.header.tokens.vocab_size);
    vocab_unknown |= source.header.tokens.vocab_size == 0;
    if (!view.weights.empty()) {
      absl::StrAppend(&h.source_fingerprint, s == 0 ? ", a mixture of " : "; ",
                      DatasetIdentity(source.header, source.completion), " weight ",
                      s < view.weights.size() ? view.weights[s] : 0.0);
    }
  }
  if (vocab_unknown) h.tokens.vocab_size = 0;
  h.tokens.width = std::max(width, 2);
  c.payload_bytes = c.sample_count * (view.seq_len + 1) * static_cast<uint64_t>(h.tokens.width);
  return {std::move(h), c};
}

absl::StatusOr<std::unique_ptr<DatasetReader>> OpenSequences(
    std::vector<std::unique_ptr<DatasetReader>> documents, std::shared_ptr<const SequencePlan> plan,
    const SequenceView& view, bool verify) {
  if (documents.empty()) return absl::InvalidArgumentError("a view of no dataset");
  std::vector<SequenceSource> sources;
  for (const auto& d : documents) {
    if (!IsTokenDataset(d->header())) {
      return absl::InvalidArgumentError(
          absl::StrCat(d->path(), " is an image dataset: it has no token sequences"));
    }
    sources.push_back({d->header(), d->completion()});
  }
  auto [header, completion] = SequencesOf(sources, view);
  bool fits = plan->seq_len() == view.seq_len && plan->sources() == documents.size() &&
              plan->size() == completion.sample_count;
  for (size_t s = 0; fits && s < documents.size(); ++s) {
    fits = plan->documents(s) == documents[s]->size();
  }
  if (!fits) {
    return absl::InvalidArgumentError(
        absl::StrCat("a plan of ", plan->size(), " sequences of ", plan->seq_len(), " ids over ",
                     plan->sources(), " source(s) is not the view of ", documents.front()->path(),
                     documents.size() > 1 ? " and others" : "", " (", completion.sample_count,
                     " sequences of ", view.seq_len, " ids)"));
  }
  auto reader = std::unique_ptr<DatasetReader>(new DatasetReader());
  auto store =
      std::make_unique<SequenceStore>(std::move(documents), std::move(plan), header, verify);
  reader->path_ = store->path();
  reader->header_ = std::move(header);
  reader->completion_ = completion;
  reader->file_bytes_ = store->file_bytes();
  reader->verify_checksums_ = verify;
  reader->store_ = std::move(store);
  return reader;
}

}  // namespace ddpio::storage
