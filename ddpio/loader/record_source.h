// RecordSource: where a Loader's workers get the stored records of a batch when they do not read
// the dataset themselves. The group feeder's peers get them from their leader over the network
// (broadcast/group_feeder.h); the leader's own loader gets them from the leader's reading thread.
//
// A source delivers whole batches, numbered like the loader's plan (epoch, step), each holding
// the records' stored bytes (what storage::DecodeRecord parses and checksums). The loader checks
// that the indices it is given are the ones its own sampler expects, so a source out of step
// with the sampler is DataLoss, never a silently wrong batch.
#ifndef DDPIO_LOADER_RECORD_SOURCE_H_
#define DDPIO_LOADER_RECORD_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/storage/record.h"

namespace ddpio::loader {

struct SourcedBatch {
  uint64_t epoch = 0;
  uint64_t step = 0;
  std::vector<uint64_t> indices;
  // Stored bytes of each record, pointing into `bytes`; empty when the source could not read
  // that record (it was skipped under the `skip` policy: the loader treats it as a bad sample).
  std::vector<absl::Span<const uint8_t>> records;
  // What each record is bound to (storage/record.h), to check a bound record's checksum as the
  // reader did; parallel to `records` (or empty: the records are unbound).
  std::vector<storage::RecordBinding> bindings;
  std::vector<uint8_t> bytes;
};

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Batch `step` of `epoch`, blocking until it is there. Cancelled once `stop` is true (Wake()
  // makes a waiting call look at it); the source's own error otherwise (e.g. Unavailable: the
  // leader is gone; the error the leader sent).
  virtual absl::StatusOr<std::shared_ptr<const SourcedBatch>> Fetch(
      uint64_t epoch, uint64_t step, const std::atomic<bool>& stop) = 0;
  // Wakes every Fetch waiting, so that it sees its stop flag.
  virtual void Wake() = 0;
  // What the loader names in errors (e.g. "records from rank 0").
  virtual std::string name() const = 0;
};

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_RECORD_SOURCE_H_
