#include "ddpio/sampler/shuffle_quality.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ddpio/common/splitmix64.h"

namespace ddpio::sampler {

ShuffleQuality MeasureShuffleQuality(const EpochPlan& plan, uint64_t classes, uint64_t batch_size,
                                     int max_ranks) {
  ShuffleQuality q;
  const uint64_t n = plan.options().dataset_size;
  if (n == 0 || classes == 0 || batch_size == 0) return q;
  classes = std::min(classes, n);
  const auto class_of = [&](uint64_t i) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(i) * classes) / n);
  };
  // The dataset's share of each class (equal but for rounding).
  std::vector<double> share(classes, 0.0);
  for (uint64_t c = 0; c < classes; ++c) {
    const uint64_t first = (c * n + classes - 1) / classes,
                   end = ((c + 1) * n + classes - 1) / classes;
    share[c] = static_cast<double>(end - first) / static_cast<double>(n);
  }
  std::vector<uint64_t> count(classes, 0);
  std::vector<uint64_t> touched;
  const auto add = [&](uint64_t c) {
    if (count[c]++ == 0) touched.push_back(c);
  };
  // A batch of `size`'s distance from the dataset's class mix, its counts in `count` (cleared
  // after); TV = 1/2 sum |p - q| = the sum over classes of what the batch has beyond their share.
  const auto distance = [&](uint64_t size) {
    double excess = 0;
    for (uint64_t c : touched) {
      const double p = static_cast<double>(count[c]) / static_cast<double>(size);
      excess += std::max(0.0, p - share[c]);
    }
    for (uint64_t c : touched) count[c] = 0;
    touched.clear();
    return excess;
  };
  // The i.i.d. baselines: batches of independent uniform draws.
  SplitMix64 rng(0x5EED);
  const auto iid = [&](uint64_t size, int batches, double* distinct) {
    double sum = 0, kinds = 0;
    for (int b = 0; b < batches; ++b) {
      for (uint64_t j = 0; j < size; ++j) add(class_of(rng.Next() % n));
      kinds += static_cast<double>(touched.size());
      sum += distance(size);
    }
    *distinct = kinds / batches;
    return sum / batches;
  };
  const int ranks = max_ranks > 0 ? std::min(max_ranks, plan.num_replicas()) : plan.num_replicas();
  const uint64_t global = batch_size * static_cast<uint64_t>(ranks);
  q.iid_class_distance = iid(batch_size, 2000, &q.iid_distinct_classes);
  q.iid_step_class_distance =
      iid(global, static_cast<int>(std::max<uint64_t>(20, 400000 / global)), &q.iid_step_classes);

  double distinct_sum = 0, distance_sum = 0, jump_sum = 0;
  uint64_t jumps = 0;
  for (int r = 0; r < ranks; ++r) {
    const uint64_t samples = plan.NumSamples(r);
    for (uint64_t j = 1; j < samples; ++j) {
      const uint64_t i = plan.IndexAt(r, j), previous = plan.IndexAt(r, j - 1);
      jump_sum +=
          static_cast<double>(i > previous ? i - previous : previous - i) / static_cast<double>(n);
      ++jumps;
    }
    for (uint64_t b = 0; b + batch_size <= samples; b += batch_size) {
      for (uint64_t j = b; j < b + batch_size; ++j) add(class_of(plan.IndexAt(r, j)));
      distinct_sum += static_cast<double>(touched.size());
      distance_sum += distance(batch_size);
      ++q.batches;
    }
  }
  // Steps: what every rank's batch k adds up to (the gradient DDP averages).
  uint64_t steps = UINT64_MAX;
  for (int r = 0; r < ranks; ++r) steps = std::min(steps, plan.NumSamples(r) / batch_size);
  double step_distinct = 0, step_distance = 0;
  for (uint64_t k = 0; k < steps; ++k) {
    for (int r = 0; r < ranks; ++r) {
      for (uint64_t j = k * batch_size; j < (k + 1) * batch_size; ++j) {
        add(class_of(plan.IndexAt(r, j)));
      }
    }
    step_distinct += static_cast<double>(touched.size());
    step_distance += distance(global);
  }
  if (q.batches > 0) {
    q.distinct_classes = distinct_sum / static_cast<double>(q.batches);
    q.class_distance = distance_sum / static_cast<double>(q.batches);
  }
  if (steps > 0 && steps != UINT64_MAX) {
    q.steps = steps;
    q.step_classes = step_distinct / static_cast<double>(steps);
    q.step_class_distance = step_distance / static_cast<double>(steps);
  }
  if (jumps > 0) q.position_jump = jump_sum / static_cast<double>(jumps);
  return q;
}

}  // namespace ddpio::sampler
