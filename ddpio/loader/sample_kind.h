// SampleKind: what the loader makes of one stored record — the seam between the loader's
// machinery (sampler order, worker threads, batch slots, prefetch, holds, the epoch-tail sharing,
// the bad-sample policy) and the kind of data the records hold. Images (image_sample_kind.h) are
// the one kind today; another kind (token sequences, say) is one more implementation of these
// two classes, with no change to the loader.
//
// What a kind provides:
//   - sample_bytes(): the bytes of one sample. A batch's data is its samples back to back in
//     sampler order, position k at k * sample_bytes(), `size` of them (Batch in loader.h); a
//     kind fixes the layout within a sample (images: uint8 HWC or float CHW). The loader keeps
//     the per-sample label (the record's), dataset index and valid flag beside the data itself.
//   - NewWorker(): one SampleWorker per loader worker thread, used by that thread only, so a
//     worker keeps decoders and scratch buffers of its own without locks. The kind is shared,
//     read-only, by all of them and must outlive them (the loader owns both).
//   - SampleWorker::Fill: one record into its place in the batch, as a pure function of the
//     record, its dataset index, the epoch and the kind's settings — never of the thread, the
//     worker or the order: batches are the same for any worker count, and at an epoch's end one
//     batch's samples are filled by several workers.
//   - SampleWorker::Zero: the stand-in written for a bad sample skipped under
//     BadSamplePolicy::kSkip (flagged invalid by the loader).
//
// Thread-safety: SampleKind's methods are const and may be called from any thread; a
// SampleWorker is not thread-safe (one per thread).
#ifndef DDPIO_LOADER_SAMPLE_KIND_H_
#define DDPIO_LOADER_SAMPLE_KIND_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ddpio/storage/record.h"

namespace ddpio::loader {

// Nanoseconds a worker spent per stage; Fill adds to them, and the loader sums them over its
// workers into LoaderStats (decode_ns, augment_ns, collate_ns). A kind without a stage leaves
// it at zero.
struct SampleNanos {
  uint64_t decode = 0;   // the payload into its values (images: JPEG to pixels)
  uint64_t augment = 0;  // their transformation (images: crop, resample, flip)
  uint64_t collate = 0;  // their conversion into the batch's layout (images: float NCHW)
};

class SampleWorker {
 public:
  virtual ~SampleWorker() = default;

  // Writes the sample of `record` (dataset index `index`, in `epoch`) to `out`, which is
  // sample_bytes() long and lies in the batch slot; adds the time it took to `*nanos`. `record`'s
  // bytes are the caller's, valid during the call only. DataLoss for a record whose payload is
  // corrupt or unsupported: the loader then applies its bad-sample policy and names index, key
  // and source in the message. Any other error fails the batch whatever the policy.
  virtual absl::Status Fill(const storage::RecordView& record, uint64_t index, uint64_t epoch,
                            absl::Span<uint8_t> out, SampleNanos* nanos) = 0;

  // Writes the stand-in for a sample that has none (a bad one skipped) to `out`
  // (sample_bytes() long): the same bytes every time.
  virtual void Zero(absl::Span<uint8_t> out) = 0;
};

class SampleKind {
 public:
  virtual ~SampleKind() = default;

  // The bytes of one sample in a batch; constant, and positive.
  virtual size_t sample_bytes() const = 0;

  // A worker for one loader thread. Called once per loader worker, when the loader is made.
  virtual std::unique_ptr<SampleWorker> NewWorker() const = 0;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_SAMPLE_KIND_H_
