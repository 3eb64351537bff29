// A token dataset read as packed sequences: record k of the view is sequence k of a plan — the
// window of seq_len + 1 ids that packing (loader/token_packing.h) makes of the documents — so that
// everything that moves records (the loader, the group feeder, the shared index, resume and the
// elastic restart) moves token sequences exactly as it moves images, with no change.
//
// A sequence record holds its window's ids in the dataset's width (content type kTokensUint16 or
// kTokensUint32) and, as its label, the source it came from (0 but in a mixture), made at read time
// from the documents' records: each document is read, its checksum verified once for every sequence
// it is read for (a long document spans many), and its length held to the plan's. The record is
// bound (record.h) to the view — a salt of the dataset's and the view's settings — and to its
// sequence number, so a copy sent to a peer is checked there like any record.
//
// The view is a dataset of its own to the job: its header is the documents' with the view named
// in source_fingerprint, its completion counts sequences, so DatasetIdentity tells views of other
// lengths, seeds or orders apart (a peer computes the same from a Peek: SequencesOf).
//
// A view may draw on several token datasets (a weighted mixture, loader/token_mixture.h): its
// plan's pieces then name their source, the records hold ids in the widest source's width, and
// the header is the first source's naming every source (its identity and weight) in the view.
#ifndef DDPIO_STORAGE_TOKEN_SEQUENCES_H_
#define DDPIO_STORAGE_TOKEN_SEQUENCES_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::storage {

// One document's ids [begin, end) in a sequence's window.
struct DocumentPiece {
  uint64_t document = 0;
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t source = 0;  // which of the view's datasets holds the document
};

// Which document pieces make each sequence. Immutable; shared by the view's transactions.
class SequencePlan {
 public:
  virtual ~SequencePlan() = default;
  virtual uint64_t size() const = 0;     // sequences
  virtual uint64_t seq_len() const = 0;  // a window holds seq_len + 1 ids
  virtual size_t sources() const { return 1; }
  // Documents of source `source`, and the ids of one of them.
  virtual uint64_t documents(size_t source) const = 0;
  virtual uint32_t length(size_t source, uint64_t document) const = 0;
  // Sequence k's window as document pieces in stream order, into *out (replaced). k < size().
  virtual void Pieces(uint64_t k, std::vector<DocumentPiece>* out) const = 0;
};

// The settings that make a view: what its identity names.
struct SequenceView {
  uint64_t seq_len = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  std::vector<double> weights;  // a mixture's, one per source; empty for one dataset
};

// One source's facts, as its reader or a Peek has them.
struct SequenceSource {
  DatasetHeader header;
  DatasetCompletion completion;
};

// The header and completion of `view` of the token datasets `sources`: the first's header naming
// the view (and, for a mixture, every source's identity and weight), as many sequences as the
// sources hold added up — (T - 1) / seq_len of a source of T ids. What the view's reader has,
// computed alike by a rank that only peeked at the datasets.
std::pair<DatasetHeader, DatasetCompletion> SequencesOf(const std::vector<SequenceSource>& sources,
                                                        const SequenceView& view);

// The view of `documents` (token datasets' readers, which the view keeps) through `plan` (made for
// `view` over their lengths). With `verify`, each document's checksum is checked once for the
// sequences of a transaction that read it (open `documents` without verify_checksums so that it
// is not checked on every read as well). InvalidArgument for no source or an image dataset, or a
// plan whose sources, documents, size or seq_len are not the datasets' and the view's.
absl::StatusOr<std::unique_ptr<DatasetReader>> OpenSequences(
    std::vector<std::unique_ptr<DatasetReader>> documents, std::shared_ptr<const SequencePlan> plan,
    const SequenceView& view, bool verify);

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_TOKEN_SEQUENCES_H_
