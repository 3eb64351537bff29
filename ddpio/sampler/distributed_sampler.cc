#include "ddpio/sampler/distributed_sampler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/log.h"

namespace ddpio::sampler {

namespace {
constexpr EnumName<Padding> kPaddings[] = {{Padding::kPad, "pad"},
                                           {Padding::kDrop, "drop"},
                                           {Padding::kNone, "none"},
                                           {Padding::kMask, "mask"}};
}  // namespace

std::string PaddingName(Padding padding) { return NameOf(kPaddings, padding); }
absl::StatusOr<Padding> ParsePadding(std::string_view name) {
  return ParseName(kPaddings, name, "padding");
}

// ---------------------------------------------------------------------------------------------

uint64_t EpochPlan::NumSamples(int rank) const {
  if (options_.padding != Padding::kNone) return per_rank_;
  const uint64_t m = options_.dataset_size - start_;
  const uint64_t r = static_cast<uint64_t>(rank);
  const uint64_t world = static_cast<uint64_t>(options_.num_replicas);
  return r < m ? (m - r + world - 1) / world : 0;
}

uint64_t EpochPlan::NumSteps() const { return NumSamples(0); }

uint64_t EpochPlan::IndexAt(int rank, uint64_t j) const {
  // Global position in the epoch's padded list; padding wraps to the permutation's start.
  uint64_t g =
      start_ + static_cast<uint64_t>(rank) + j * static_cast<uint64_t>(options_.num_replicas);
  const uint64_t n = options_.dataset_size;
  return perm_->At(g < n ? g : g % n);
}

bool EpochPlan::IsPadding(int rank, uint64_t j) const {
  uint64_t g =
      start_ + static_cast<uint64_t>(rank) + j * static_cast<uint64_t>(options_.num_replicas);
  return g >= options_.dataset_size;
}

RankStream EpochPlan::Stream(int rank) const {
  RankStream s;
  const uint64_t count = NumSamples(rank);
  s.indices.resize(count);
  for (uint64_t j = 0; j < count; ++j) {
    s.indices[j] = IndexAt(rank, j);
    if (IsPadding(rank, j)) s.padded.push_back(j);
  }
  return s;
}

uint64_t EpochPlan::ConsumedAfter(uint64_t steps) const {
  const uint64_t n = options_.dataset_size;
  const uint64_t world = static_cast<uint64_t>(options_.num_replicas);
  const uint64_t remaining = n - start_;
  // steps * world cannot overflow when steps <= remaining / world.
  const uint64_t taken = steps > remaining / world ? remaining : std::min(remaining, steps * world);
  return start_ + taken;
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<DistributedSampler> DistributedSampler::Create(const SamplerOptions& options) {
  const bool shuffled_in_memory =
      options.order == Order::kBlock ||
      (options.shuffle && options.permutation != PermutationKind::kFeistel);
  const uint64_t limit = shuffled_in_memory ? kMaxMaterializedSamples : kMaxSamples;
  if (options.dataset_size > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset size ", options.dataset_size, " is more than the ", limit, " samples ",
        shuffled_in_memory
            ? (options.order == Order::kBlock
                   ? "the block order, held in memory, allows (4-8 bytes per sample)"
                   : "a shuffled permutation held in memory allows (4-8 bytes per sample); use the "
                     "feistel permutation for datasets this large")
            : "the sampler supports"));
  }
  if (options.num_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_replicas must be at least 1, got ", options.num_replicas));
  }
  if (options.order == Order::kBlock) {
    if (absl::Status s = CheckBlockOrder(options.block); !s.ok()) return s;
  }
  return DistributedSampler(options);
}

absl::StatusOr<EpochPlan> DistributedSampler::Plan(uint64_t epoch, uint64_t start) const {
  const uint64_t n = options_.dataset_size;
  if (start > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("resume position ", start, " is past the dataset size ", n));
  }
  EpochPlan plan;
  plan.options_ = options_;
  plan.epoch_ = epoch;
  plan.start_ = start;
  const uint64_t m = n - start;
  const uint64_t world = static_cast<uint64_t>(options_.num_replicas);
  switch (options_.padding) {
    case Padding::kDrop:
      // PyTorch: ceil((n - R) / R) when R does not divide n, i.e. floor(n / R).
      plan.per_rank_ = m / world;
      break;
    case Padding::kPad:
    case Padding::kMask:
      plan.per_rank_ = (m + world - 1) / world;
      break;
    case Padding::kNone:
      plan.per_rank_ = 0;  // per rank, see NumSamples
      break;
  }
  if (options_.order == Order::kBlock) {
    plan.lanes_ = BlockLanes(options_.block, options_.num_replicas);
    plan.perm_ = std::make_shared<const Permutation>(
        MakeBlockOrder(n, options_.seed + epoch, options_.shuffle, options_.permutation,
                       options_.block, plan.lanes_));
  } else {
    plan.perm_ = std::make_shared<const Permutation>(
        Permutation::Make(n, options_.seed + epoch, options_.shuffle, options_.permutation));
  }
  return plan;
}

void DistributedSampler::SetEpoch(uint64_t epoch) { epoch_ = epoch; }

absl::StatusOr<EpochPlan> DistributedSampler::NextPlan(uint64_t start) {
  if (options_.shuffle && options_.warn_repeated_epoch && last_planned_epoch_ == epoch_ &&
      start == 0 && !warned_) {
    warned_ = true;
    DDPIO_LOG(WARNING) << "sampler: epoch " << epoch_
                       << " is being iterated again with the same shuffle; call SetEpoch(epoch) "
                          "before each epoch (as with torch's DistributedSampler.set_epoch) or "
                          "every epoch sees the same order";
  }
  last_planned_epoch_ = epoch_;
  return Plan(epoch_, start);
}

std::vector<BatchRange> MakeBatches(uint64_t count, uint64_t batch_size, bool drop_last) {
  std::vector<BatchRange> out;
  if (batch_size == 0) return out;
  for (uint64_t b = 0; b < count; b += batch_size) {
    uint64_t e = std::min(count, b + batch_size);
    if (drop_last && e - b < batch_size) break;
    out.push_back({b, e});
  }
  return out;
}

}  // namespace ddpio::sampler
