// How the remote reader groups records into GETs (remote_dataset.h), as pure functions of the
// record index: the chunks a dataset is cut into (a record asked for brings its chunk when whole
// chunks are on), and the GETs that fetch a set of records — neighbours in a file joined into one
// range GET, sent in the order their records are needed.
#ifndef DDPIO_STORAGE_REMOTE_GET_PLAN_H_
#define DDPIO_STORAGE_REMOTE_GET_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "ddpio/storage/remote/remote_format.h"

namespace ddpio::storage::remote {

struct GetLimits {
  // Records of one file closer than this are joined (the bytes between read and dropped).
  uint64_t coalesce_gap = 0;
  // The most bytes one GET spans.
  uint64_t request_limit = 0;
};

struct ChunkTable {
  std::vector<uint64_t> begin;  // first record of each chunk, then the number of records
  uint64_t total_bytes = 0;     // of every record
  uint64_t largest_bytes = 0;   // the most bytes one chunk's GET spans
};

// Consecutive records of one file, each within coalesce_gap of the chunk's byte range (records
// of a few KB share LMDB pages in no order of offset; larger ones follow each other), the range
// within request_limit; with order_chunk_records > 0 a chunk never spans a multiple of it (the
// block order's chunks: one GET each).
ChunkTable MakeChunkTable(absl::Span<const RecordLocation> index, const GetLimits& limits,
                          uint64_t order_chunk_records);

struct PlannedGet {
  std::vector<uint64_t> records;  // the records it brings, in file order
  size_t first_need = 0;          // when its first record is needed (0: first)
};

// The GETs that fetch `wanted` (records in the order they are needed) and `alone` (records each
// fetched by a GET of its own, needed before all of `wanted`: the first batch). Records of one
// file are joined while the next lies within coalesce_gap of the GET's end — or in the same chunk
// of `chunk_of` (each record's chunk; empty: no chunks) whatever lies between, so a chunk partly
// held still costs one GET — and the GET stays within request_limit. `spanned`: records a GET may
// read across without bringing them (a first batch's record inside its chunk, so that the chunk
// still comes in one GET). The GETs come in the order their first record is needed.
std::vector<PlannedGet> PlanGets(absl::Span<const RecordLocation> index,
                                 const std::vector<uint64_t>& wanted,
                                 const std::vector<uint64_t>& alone,
                                 const std::vector<uint64_t>& spanned,
                                 absl::Span<const uint32_t> chunk_of, const GetLimits& limits);

}  // namespace ddpio::storage::remote

#endif  // DDPIO_STORAGE_REMOTE_GET_PLAN_H_
