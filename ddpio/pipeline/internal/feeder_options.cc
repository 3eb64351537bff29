#include "ddpio/pipeline/internal/feeder_options.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::internal {
namespace {

// InvalidArgument "<setting> must be <what>, got <value>", carrying the setting's name.
template <typename T>
absl::Status Bad(const std::string& setting, const std::string& what, T value) {
  return WithSetting(
      absl::InvalidArgumentError(absl::StrCat(setting, " must be ", what, ", got ", value)),
      setting);
}

absl::Status ValidateGroup(const PipelineOptions& o) {
  if (o.group_size < 1) return Bad("group_size", "at least 1", o.group_size);
  if (o.read_ahead < 0) return Bad("read_ahead", "at least 0", o.read_ahead);
  if (o.depth < 1) return Bad("depth", "at least 1", o.depth);
  if (o.timeout.count() <= 0) return Bad("timeout", "above 0 ms", o.timeout.count());
  return absl::OkStatus();
}

absl::Status ValidateBatches(const PipelineOptions& o) {
  if (o.batch_size < 1) return Bad("batch_size", "at least 1", o.batch_size);
  if (o.workers < 0) return Bad("workers", "at least 0", o.workers);
  if (o.prefetch < 1) return Bad("prefetch", "at least 1", o.prefetch);
  for (float s : o.stddev) {
    if (s == 0 || !std::isfinite(s)) return Bad("stddev", "finite and not 0 in every channel", s);
  }
  for (float m : o.mean) {
    if (!std::isfinite(m)) return Bad("mean", "finite in every channel", m);
  }
  if (o.held_batches < 1) return Bad("held_batches", "at least 1", o.held_batches);
  if (o.held_timeout.count() < 0)
    return Bad("held_timeout", "at least 0 ms", o.held_timeout.count());
  return absl::OkStatus();
}

absl::Status ValidateAugment(const PipelineOptions& o) {
  constexpr int kMaxSide = 8192;
  const std::string range = absl::StrCat("in [1, ", kMaxSide, "]");
  if (o.image_size < 1 || o.image_size > kMaxSide) return Bad("image_size", range, o.image_size);
  if (o.image_height < 0 || o.image_height > kMaxSide) {
    return Bad("image_height", absl::StrCat("0 (image_size) or ", range), o.image_height);
  }
  if (o.resize_size < 0) return Bad("resize_size", "at least 0", o.resize_size);
  if (!(0 < o.scale_min && o.scale_min <= o.scale_max && o.scale_max <= 1)) {
    return Bad("scale_min", "in (0, scale_max] with scale_max <= 1",
               absl::StrCat(o.scale_min, " (scale_max ", o.scale_max, ")"));
  }
  if (!(0 < o.ratio_min && o.ratio_min <= o.ratio_max && std::isfinite(o.ratio_max))) {
    return Bad("ratio_min", "in (0, ratio_max] with a finite ratio_max",
               absl::StrCat(o.ratio_min, " (ratio_max ", o.ratio_max, ")"));
  }
  if (!(0 <= o.flip_probability && o.flip_probability <= 1)) {
    return Bad("flip_probability", "in [0, 1]", o.flip_probability);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePipelineOptions(const PipelineOptions& o) {
  DDPIO_RETURN_IF_ERROR(ValidateGroup(o));
  DDPIO_RETURN_IF_ERROR(ValidateBatches(o));
  return ValidateAugment(o);
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
  s.warn_repeated_epoch = o.warn_repeated_epoch;

  loader::LoaderOptions& l = f.loader;
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
