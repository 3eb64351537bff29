// DistributedSampler: which sample indices each rank sees, in which order, every epoch.
//
// By default it reproduces torch.utils.data.DistributedSampler index for index (same dataset
// size, num_replicas, rank, shuffle, seed, epoch and drop_last): the epoch's permutation
// (permutation.h), padded to a multiple of the world size, and rank r takes positions
// r, r + R, r + 2R, ... of the padded list. Pure functions of their inputs, no IO.
//
// Padding is chosen explicitly:
//   kPad   PyTorch's default: wrap around to the start of the permutation until every rank has
//          ceil(n / R) samples (some samples appear twice);
//   kDrop  PyTorch's drop_last: floor(n / R) samples per rank, the tail of the permutation is
//          not used this epoch;
//   kNone  no sample twice, none dropped: ranks 0..(m % R)-1 get one sample more than the rest;
//   kMask  like kPad, but every padded entry is flagged, so evaluation can leave it out and
//          metrics summed over ranks equal single-process metrics exactly.
//
// Resume. An epoch's progress is one number, `start`: how many entries of the epoch's
// permutation have been consumed, always a prefix because ranks take strided positions in
// lock-step (after k steps on R ranks, positions [0, k*R) are consumed). A plan for (epoch,
// start) gives the remaining entries [start, n) to the ranks in the same strided way, padding
// still wrapping to the permutation's start, so:
//   - same world size: resuming at start = k*R yields exactly the uninterrupted streams from
//     step k on, padding entries included;
//   - another world size (elastic): the remaining n - start samples are dealt to the new ranks,
//     each exactly once (kNone, kPad, kMask; kPad/kMask add at most R2 - 1 duplicates of the
//     epoch's first samples, flagged under kMask), except that kDrop drops at most R2 - 1 of
//     them, as it drops a tail in any epoch. Nothing consumed is repeated as a real sample.
// ConsumedAfter(steps) gives the new `start` to save in a checkpoint.
//
// Epoch seeding. A plan is always for an explicit epoch (Plan(epoch, start)), so a stateless
// caller cannot forget it. The PyTorch-style SetEpoch / NextPlan pair is stateful: NextPlan on
// a shuffled sampler whose epoch was not advanced since the last NextPlan logs a warning (once
// per sampler) naming the repeated epoch — the classic forgotten set_epoch — and the ddpio
// loader advances its epoch itself.
#ifndef DDPIO_SAMPLER_DISTRIBUTED_SAMPLER_H_
#define DDPIO_SAMPLER_DISTRIBUTED_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/sampler/block_order.h"
#include "ddpio/sampler/permutation.h"

namespace ddpio::sampler {

enum class Padding { kPad, kDrop, kNone, kMask };
std::string PaddingName(Padding padding);
absl::StatusOr<Padding> ParsePadding(std::string_view name);

// The largest datasets the sampler takes: PyTorch's permutation is held in memory (4 bytes per
// sample below 2^32, 8 above), so at most 2^33 samples (64 GiB of permutation); the Feistel
// permutation needs no memory, so 2^48.
inline constexpr uint64_t kMaxMaterializedSamples = uint64_t{1} << 33;
inline constexpr uint64_t kMaxSamples = uint64_t{1} << 48;

struct SamplerOptions {
  uint64_t dataset_size = 0;
  int num_replicas = 1;  // world size (or number of groups in replicate mode)
  bool shuffle = true;
  uint64_t seed = 0;  // PyTorch seeds its generator with seed + epoch
  Padding padding = Padding::kPad;
  PermutationKind permutation = PermutationKind::kTorch;
  // exact (default): the permutation above; block: chunks of records kept together
  // (block_order.h), built from the permutation kind over the chunks.
  Order order = Order::kExact;
  BlockOrder block;
  // Log a warning when a shuffled epoch is planned twice in a row from its start (a forgotten
  // SetEpoch). Off where the caller warns in its own words (Python's loader names set_epoch).
  bool warn_repeated_epoch = true;
};

// One rank's indices for one epoch (from a plan's start on).
struct RankStream {
  std::vector<uint64_t> indices;
  std::vector<uint64_t> padded;  // positions in `indices` that are padding (duplicates)
};

// The assignment of one epoch's samples (from `start` on) to ranks. Cheap to copy (shares the
// permutation); immutable; thread-safe.
class EpochPlan {
 public:
  uint64_t epoch() const { return epoch_; }
  uint64_t start() const { return start_; }
  int num_replicas() const { return options_.num_replicas; }
  const SamplerOptions& options() const { return options_; }
  // The block order's lanes this plan deals (BlockLanes); 0 in the exact order.
  uint64_t lanes() const { return lanes_; }

  // Samples rank `rank` gets in this plan.
  uint64_t NumSamples(int rank) const;
  // Steps in this plan: the largest NumSamples (all ranks step together).
  uint64_t NumSteps() const;
  // The j-th sample (j < NumSamples(rank)) of rank `rank`: its dataset index, and whether it is
  // padding (a duplicate of a sample of this epoch).
  uint64_t IndexAt(int rank, uint64_t j) const;
  bool IsPadding(int rank, uint64_t j) const;
  RankStream Stream(int rank) const;

  // The `start` to resume this epoch from after every rank completed `steps` steps of this
  // plan: min(start + steps * R, n).
  uint64_t ConsumedAfter(uint64_t steps) const;

  // Bytes held by the permutation (shared between copies).
  uint64_t memory_bytes() const { return perm_->memory_bytes(); }

 private:
  friend class DistributedSampler;
  SamplerOptions options_;
  uint64_t epoch_ = 0;
  uint64_t start_ = 0;
  uint64_t per_rank_ = 0;  // samples per rank for pad/mask/drop
  uint64_t lanes_ = 0;
  std::shared_ptr<const Permutation> perm_;
};

class DistributedSampler {
 public:
  // InvalidArgument when num_replicas < 1.
  static absl::StatusOr<DistributedSampler> Create(const SamplerOptions& options);

  // The plan for an explicit epoch, from `start` (entries of the epoch's permutation already
  // consumed; 0 for a fresh epoch). InvalidArgument when start > dataset_size.
  absl::StatusOr<EpochPlan> Plan(uint64_t epoch, uint64_t start = 0) const;

  // PyTorch-style state: SetEpoch, then NextPlan for the epoch set. See the header comment for
  // the warning on a repeated epoch.
  void SetEpoch(uint64_t epoch);
  uint64_t epoch() const { return epoch_; }
  absl::StatusOr<EpochPlan> NextPlan(uint64_t start = 0);
  // Whether NextPlan has warned about a repeated epoch (for tests and summaries).
  bool warned_repeated_epoch() const { return warned_; }

  const SamplerOptions& options() const { return options_; }

 private:
  explicit DistributedSampler(const SamplerOptions& options) : options_(options) {}
  SamplerOptions options_;
  uint64_t epoch_ = 0;
  std::optional<uint64_t> last_planned_epoch_;
  bool warned_ = false;
};

// Batches over a rank's stream as PyTorch's BatchSampler forms them: consecutive chunks of
// `batch_size`, the last one shorter unless `drop_last`. Returns [begin, end) positions.
struct BatchRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};
std::vector<BatchRange> MakeBatches(uint64_t count, uint64_t batch_size, bool drop_last);

}  // namespace ddpio::sampler

#endif  // DDPIO_SAMPLER_DISTRIBUTED_SAMPLER_H_
