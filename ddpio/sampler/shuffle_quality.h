// How well an epoch's order mixes a dataset, measured on the indices alone, so that the exact
// and the block order can be compared for any dataset size, world and batch size.
//
// The model: a dataset stored sorted by class, `classes` classes of equal size (sample i has
// class i * classes / n) — the worst case for an order that keeps neighbours together, and what
// `ddpio convert` makes of an ImageFolder (ImageNet: 1,000 class folders). SGD wants every batch
// to look like a draw from the whole dataset, so the statistics are per batch — a rank's (what
// its BatchNorm sees) and a step's (every rank's batch k together: the gradient DDP averages):
//   - the distinct classes in it;
//   - the total-variation distance between its class histogram and the dataset's (0: each class
//     in proportion; 1: classes the dataset barely has);
// each beside the same for i.i.d. draws of the same size (a batch smaller than the class count is
// far from the dataset's mix however drawn); and the mean distance between consecutive samples'
// positions on a rank as a share of n (a uniform shuffle: 1/3; a sequential read: ~0).
#ifndef DDPIO_SAMPLER_SHUFFLE_QUALITY_H_
#define DDPIO_SAMPLER_SHUFFLE_QUALITY_H_

#include <cstdint>

#include "ddpio/sampler/distributed_sampler.h"

namespace ddpio::sampler {

struct ShuffleQuality {
  // Per batch of one rank (what a rank's BatchNorm sees).
  uint64_t batches = 0;         // full batches measured (every rank's)
  double distinct_classes = 0;  // mean per batch
  double class_distance = 0;    // mean total-variation distance per batch
  // Per step: every rank's batch k together (the gradient DDP averages).
  uint64_t steps = 0;
  double step_classes = 0;
  double step_class_distance = 0;
  // Mean |Δ position| / n between consecutive samples of a rank.
  double position_jump = 0;
  // The same for i.i.d. draws (sampled).
  double iid_distinct_classes = 0, iid_class_distance = 0;
  double iid_step_classes = 0, iid_step_class_distance = 0;
};

// Over every rank's full batches of `batch_size` in `plan` (from its start), for a dataset of
// `classes` classes stored sorted by class. Ranks are measured up to `max_ranks` (0: all).
ShuffleQuality MeasureShuffleQuality(const EpochPlan& plan, uint64_t classes, uint64_t batch_size,
                                     int max_ranks = 0);

}  // namespace ddpio::sampler

#endif  // DDPIO_SAMPLER_SHUFFLE_QUALITY_H_
