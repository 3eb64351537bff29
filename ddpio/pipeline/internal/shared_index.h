// ShareStoreIndex: a dataset in an object store is opened from one fetch of its manifest and
// record index per job, not one per rank. Rank 0 fetches both (two GETs) and broadcasts them over
// the job's world; every rank then opens (or, fed by its leader, identifies) the dataset from
// them, checked exactly as if fetched (storage::StoreOverrides::preloaded_index). A 1,024-rank
// job over ImageNet's 20 MB index would otherwise ask the store for 20 GB in its first seconds.
#ifndef DDPIO_PIPELINE_INTERNAL_SHARED_INDEX_H_
#define DDPIO_PIPELINE_INTERNAL_SHARED_INDEX_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::internal {

// Collective on `world` whenever it has several ranks: every rank calls it, whatever its `data`.
// Rank 0, given an s3:// dataset, fetches and sends its URL, manifest and index (an index over
// 1 GiB is not shared: every rank then fetches its own). A rank given the same URL gets
// options->store_overrides.preloaded_index; one given another dataset keeps its own (and the
// group's comparison of datasets then names the difference). Rank 0's error fetching is the error
// of every rank given its URL (rank 0's words, said to be rank 0's on the others); a broadcast
// that fails or times out (each step waits up to 5 x `timeout`, rank 0's fetch being up to four
// requests each bounded by it) is this rank's own, as is an announcement beyond the bounds.
absl::Status ShareStoreIndex(comm::Communicator& world, const std::string& data,
                             std::chrono::milliseconds timeout, storage::ReaderOptions* options);

}  // namespace ddpio::internal

#endif  // DDPIO_PIPELINE_INTERNAL_SHARED_INDEX_H_
