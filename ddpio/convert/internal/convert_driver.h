// The conversion loop every source kind shares: the dataset created or resumed, entries made into
// records by N workers and appended in source order, each full batch committed together with the
// progress entry a resumed conversion continues from, progress reported, cancellation and bad
// entries handled as ConvertOptions says (skip_invalid, resume). What an entry is — an image file,
// a Caffe datum, a document of token ids — is the caller's: EntrySource::load.
#ifndef DDPIO_CONVERT_INTERNAL_CONVERT_DRIVER_H_
#define DDPIO_CONVERT_INTERNAL_CONVERT_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/convert/convert.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/dataset_writer.h"
#include "ddpio/storage/record.h"

namespace ddpio::convert::internal {

// One source entry made into a record, or why it could not be.
struct LoadedEntry {
  absl::StatusOr<storage::Record> record = absl::UnknownError("unset");
  uint64_t bytes_read = 0;  // bytes read from the source for it
  std::string stored_as;    // how it was stored, for the summary ("" leaves it out)
};

struct EntrySource {
  uint64_t count = 0;  // entries 0 .. count-1, stored in this order
  int workers = 1;     // load is called from this many threads, worker 0 .. workers-1
  // Entry `index` as a record (its source name set). Called concurrently for different workers,
  // never twice at once for one worker. DataLoss, NotFound or PermissionDenied: a bad entry,
  // skippable under skip_invalid; any other error stops the conversion.
  std::function<LoadedEntry(uint64_t index, int worker)> load;
  // How the skipped list names entry `index`.
  std::function<std::string(uint64_t index)> name;
  // Optional: called on the converting thread with every record appended, in order; and before
  // every commit (the final one included) with the writer, to put metadata describing the records
  // appended since the last commit into the same transaction.
  std::function<void(const storage::Record& record)> appended;
  std::function<absl::Status(storage::DatasetWriter& writer)> before_commit;
};

// Converts `source` into o.out (created, or resumed when o.resume and it exists), with `header`.
// `summary` comes filled with what the caller knows (source, entries, classes); returned with the
// rest. Errors as Convert(listing, ...) in convert.h says.
absl::StatusOr<ConvertSummary> RunConversion(const storage::DatasetHeader& header,
                                             const ConvertOptions& o, const EntrySource& source,
                                             const ProgressCallback& callback,
                                             ConvertSummary summary);

}  // namespace ddpio::convert::internal

#endif  // DDPIO_CONVERT_INTERNAL_CONVERT_DRIVER_H_
