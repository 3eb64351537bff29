#include "ddpio/pipeline/internal/feeder_options.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/pipeline/settings.h"

namespace ddpio::internal {
namespace {

// What the table cannot check one setting at a time: the ranges' two ends.
absl::Status CheckRanges(const PipelineOptions& o) {
  if (o.scale_min > o.scale_max) {
    return WithSetting(
        absl::InvalidArgumentError(absl::StrCat("scale_min must be at most scale_max, got ",
                                                o.scale_min, " > ", o.scale_max)),
        "scale_min");
  }
  if (o.ratio_min > o.ratio_max) {
    return WithSetting(
        absl::InvalidArgumentError(absl::StrCat("ratio_min must be at most ratio_max, got ",
                                                o.ratio_min, " > ", o.ratio_max)),
        "ratio_min");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePipelineOptions(const PipelineOptions& o) {
  for (const Setting& s : PipelineSettings()) {
    DDPIO_RETURN_IF_ERROR(CheckSetting(s, s.get(o)).status());
  }
  return CheckRanges(o);
}

broadcast::FeederOptions FeederOptionsFor(const PipelineOptions& o) {
  broadcast::FeederOptions f;
  f.mode = o.mode;
  f.payload = o.payload;
  f.readers = o.readers;
  f.relay = o.relay;
  f.read_ahead = o.read_ahead;
  f.depth = o.depth;
  f.timeout = o.timeout;
  f.cuda = o.cuda;
  f.dataset.path = o.data;

  sampler::SamplerOptions& s = f.sampler;
  s.shuffle = o.shuffle;
  s.seed = o.seed;
  s.padding = o.padding;
  s.permutation = o.permutation;
  s.order = o.order;
  s.block = {o.block_chunk, o.block_window, o.block_lanes};
  s.warn_repeated_epoch = o.warn_repeated_epoch;

  loader::LoaderOptions& l = f.loader;
  l.seq_len = o.seq_len;
  l.workers = o.workers;
  l.prefetch = o.prefetch;
  l.batch_size = o.batch_size;
  l.drop_last = o.drop_last;
  l.output = o.output;
  l.mean = o.mean;
  l.stddev = o.stddev;
  l.decode = o.decode;
  l.bad_samples = o.bad_samples;
  l.seed = o.augment_seed;
  l.copy_to_device = o.copy_to_device;
  l.prefetch_records = o.prefetch_records;
  l.held_batches = o.held_batches;
  l.held_timeout = o.held_timeout;
  l.held_overflow = o.held_overflow;

  loader::AugmentOptions& a = l.augment;
  a.train = o.train;
  a.size = o.image_size;
  a.height = o.image_height;
  a.scale_min = o.scale_min;
  a.scale_max = o.scale_max;
  a.ratio_min = o.ratio_min;
  a.ratio_max = o.ratio_max;
  a.flip_probability = o.flip_probability;
  a.resize_size = o.resize_size;
  return f;
}

}  // namespace ddpio::internal
