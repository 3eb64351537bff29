// The block order: an epoch's sample order that keeps each reader to a few chunks of the dataset
// at a time, so that a dataset in an object store is read a whole chunk per request with a
// bounded cache (the way streaming loaders read shards), where the exact order (torch's) needs
// any record at any time.
//
// The dataset's records are grouped into chunks of `chunk_records` consecutive indices (the last
// one shorter). Each epoch:
//   1. the chunks are permuted (the sampler's permutation kind over the chunk count, seeded with
//      seed + epoch as the exact order is);
//   2. the records of the chunks, in that order, are dealt to `lanes` lanes as consecutive runs:
//      lane l gets the next ceil((n - l) / lanes) records — exactly the number of positions
//      p < n with p % lanes == l;
//   3. each lane's run is shuffled within a sliding window of window × chunk_records records:
//      the record at place j of the run gets the key j + u_j (u_j uniform in [0, B), a hash of
//      seed + epoch, lane and j) and the run is sorted by key (a py1e-like spread: no block edges);
//   4. the epoch's order puts lane l's shuffled run at positions l, l + lanes, l + 2 lanes, ...
// The result is a permutation of [0, n), so everything the sampler promises of the exact order —
// strided shares, padding, resume from a consumed prefix, another world size — holds unchanged.
// With lanes = the number of replicas, replica r reads lane r alone: at any point of the epoch at
// most window + 2 of its chunks have been started and not finished (a record placed at j comes
// out within B places of j). Another world size reading the same lanes still gets every sample
// exactly once; a replica then reads lanes/R lanes (or R/lanes replicas share one).
// Without shuffle: chunks in order, no spread — each lane a contiguous run of the dataset.
// Deterministic from (n, seed + epoch, chunk_records, window, lanes, permutation kind).
#ifndef DDPIO_SAMPLER_BLOCK_ORDER_H_
#define DDPIO_SAMPLER_BLOCK_ORDER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddpio/sampler/permutation.h"

namespace ddpio::sampler {

// exact (default): torch's DistributedSampler order; block: the order above.
enum class Order { kExact, kBlock };
std::string OrderName(Order order);
absl::StatusOr<Order> ParseOrder(std::string_view name);

struct BlockOrder {
  uint64_t chunk_records = 128;  // records per chunk; >= 1
  uint64_t window = 128;         // chunks a lane's shuffle spreads over; >= 1
  // Lanes the chunks are dealt to; 0: one per replica of the world planning the epoch. A job that
  // may resume on another world size records the lanes it used (EpochPlan::lanes) and keeps them.
  uint64_t lanes = 0;
};

// InvalidArgument naming the field when chunk_records or window is 0.
absl::Status CheckBlockOrder(const BlockOrder& block);

// The lanes an epoch of `num_replicas` replicas uses.
inline uint64_t BlockLanes(const BlockOrder& block, int num_replicas) {
  return block.lanes != 0 ? block.lanes : static_cast<uint64_t>(num_replicas);
}

// The epoch's order (above) for `n` records, seeded with `seed` (seed + epoch) over `lanes` lanes:
// entry p is the record at position p. Holds 4 bytes per record (8 from 2^32 records) and, while
// it is made, 16 bytes for each of min(a lane's records, window x chunk_records) keys.
Permutation MakeBlockOrder(uint64_t n, uint64_t seed, bool shuffle, PermutationKind kind,
                           const BlockOrder& block, uint64_t lanes);

}  // namespace ddpio::sampler

#endif  // DDPIO_SAMPLER_BLOCK_ORDER_H_
