// Training checkpoints: model, optimizer state and the sampler position, written atomically by
// rank 0 (temporary file, fsync, rename, fsync of the directory) and read by every rank on
// resume. The position is world-size independent (sampler/distributed_sampler.h), so a job may
// resume on another world size and continue the epoch without repeating or skipping a sample.
//
// The "RNG state" is the seeds: the sampler's permutation and every augmentation are functions of
// (seed, epoch, index) only (sampler/permutation.h, loader/augment.h), so the seeds and the
// position determine every sample still to come. Resuming checks them (and the dataset size)
// against the job's.
//
// File (little-endian): "DDPIOCK4" | u64 epoch | u64 position | u64 step | u64 sampler_seed |
// u64 augment_seed | u64 dataset_size | u8 order (0 exact, 1 block) | u64 block_chunk |
// u64 block_window | u64 block_lanes | u8 momentum_started | u64 n | f32 params[n] |
// f32 momentum[n] | u64 FNV-1a-64 of everything before. The directory is created if missing.
// Version 3 ("DDPIOCK3") has no order fields (the exact order); version 2 ("DDPIOCK2", written
// before ddpio 0.2) differs from 3 only in its checksum, a FNV-1a with a truncated offset basis
// (1469598103934665603). Both are still read.
#ifndef DDPIO_TRAINER_CHECKPOINT_H_
#define DDPIO_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/sampler/block_order.h"

namespace ddpio::trainer {

struct Checkpoint {
  uint64_t epoch = 0;
  uint64_t position = 0;  // entries of the epoch's permutation consumed
  uint64_t step = 0;      // optimizer steps taken (the schedule's clock)
  uint64_t sampler_seed = 0;
  uint64_t augment_seed = 0;
  uint64_t dataset_size = 0;
  // The sample order the position counts in; for the block order its chunk, window and the lanes
  // the epoch was dealt to (Pipeline::order_lanes), which a resume on another world size keeps.
  sampler::Order order = sampler::Order::kExact;
  uint64_t block_chunk = 0, block_window = 0, block_lanes = 0;
  bool momentum_started = false;
  std::vector<float> params;
  std::vector<float> momentum;
};

std::string CheckpointPath(const std::string& dir);
// ResourceExhausted (full disk) / PermissionDenied naming the path; nothing replaced on failure.
absl::Status WriteCheckpoint(const std::string& dir, const Checkpoint& c);
// The largest checkpoint read without knowing the model: 1 G parameters with their momentum.
inline constexpr uint64_t kMaxCheckpointBytes = uint64_t{8} << 30;
// NotFound when there is none; DataLoss when it is truncated or damaged; InvalidArgument when
// checkpoint.bin is not a regular file (a FIFO, a device) or is larger than a checkpoint of
// `max_params` parameters can be (checked before reading; default: kMaxCheckpointBytes).
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& dir, uint64_t max_params = 0);
// The size of a checkpoint of `params` parameters (format 3).
uint64_t CheckpointBytes(uint64_t params);
// How far two checkpoints' parameters are apart — the same run on the device and on the CPU,
// say. max_relative is max|a - b| / max|b| (the trainer tests' measure; docs/GPU.md's ≤ 1e-5).
struct ParamDifference {
  uint64_t count = 0;      // parameters compared
  uint64_t differing = 0;  // not bit for bit the same
  double max_abs = 0;      // over the differing ones; +inf when one of them is not finite
  double max_relative = 0;
};
// InvalidArgument naming both counts when the checkpoints hold different numbers of parameters.
absl::StatusOr<ParamDifference> CompareParams(const Checkpoint& a, const Checkpoint& b);

// Removes what a writer killed mid-write left in `dir` (its temporary file); the checkpoint
// itself is untouched. Call it from the one rank that writes checkpoints, before it writes.
void RemoveStaleCheckpointTemp(const std::string& dir);

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_CHECKPOINT_H_
