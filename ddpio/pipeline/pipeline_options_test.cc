// The flat options reach the sampler, loader and feeder they belong to, and a value out of range
// is refused naming its setting.
#include "ddpio/pipeline/pipeline_options.h"

#include "ddpio/common/status_macros.h"
#include "ddpio/pipeline/internal/feeder_options.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio {
namespace {

TEST(PipelineOptions, EverySettingReachesTheFeeder) {
  PipelineOptions o;
  o.data = "/data/train";
  o.mode = broadcast::FeedMode::kReplicate;
  o.payload = broadcast::FeedPayload::kDecoded;
  o.readers = broadcast::FeedReaders::kAll;
  o.relay = broadcast::FeedRelay::kStar;
  o.read_ahead = 7;
  o.depth = 3;
  o.timeout = std::chrono::seconds(9);
  o.shuffle = false;
  o.seed = 11;
  o.padding = sampler::Padding::kMask;
  o.permutation = sampler::PermutationKind::kFeistel;
  o.warn_repeated_epoch = false;
  o.batch_size = 5;
  o.drop_last = true;
  o.workers = 2;
  o.prefetch = 4;
  o.output = loader::OutputFormat::kFloatNchw;
  o.decode = loader::DecodeMode::kExact;
  o.bad_samples = loader::BadSamplePolicy::kSkip;
  o.train = false;
  o.image_size = 32;
  o.image_height = 24;
  o.resize_size = 40;
  o.scale_min = 0.5;
  o.flip_probability = 0;
  o.augment_seed = 13;
  o.held_batches = 6;
  o.held_overflow = loader::LoaderOptions::HeldOverflow::kCopy;
  const broadcast::FeederOptions f = internal::FeederOptionsFor(o);
  EXPECT_EQ(f.dataset.path, "/data/train");
  EXPECT_EQ(f.mode, broadcast::FeedMode::kReplicate);
  EXPECT_EQ(f.payload, broadcast::FeedPayload::kDecoded);
  EXPECT_EQ(f.readers, broadcast::FeedReaders::kAll);
  EXPECT_EQ(f.relay, broadcast::FeedRelay::kStar);
  EXPECT_EQ(f.read_ahead, 7);
  EXPECT_EQ(f.depth, 3);
  EXPECT_EQ(f.timeout, std::chrono::seconds(9));
  EXPECT_FALSE(f.sampler.shuffle);
  EXPECT_EQ(f.sampler.seed, 11u);
  EXPECT_EQ(f.sampler.padding, sampler::Padding::kMask);
  EXPECT_EQ(f.sampler.permutation, sampler::PermutationKind::kFeistel);
  EXPECT_FALSE(f.sampler.warn_repeated_epoch);
  EXPECT_EQ(f.loader.batch_size, 5u);
  EXPECT_TRUE(f.loader.drop_last);
  EXPECT_EQ(f.loader.workers, 2);
  EXPECT_EQ(f.loader.prefetch, 4);
  EXPECT_EQ(f.loader.output, loader::OutputFormat::kFloatNchw);
  EXPECT_EQ(f.loader.decode, loader::DecodeMode::kExact);
  EXPECT_EQ(f.loader.bad_samples, loader::BadSamplePolicy::kSkip);
  EXPECT_EQ(f.loader.seed, 13u);
  EXPECT_EQ(f.loader.held_batches, 6);
  EXPECT_EQ(f.loader.held_overflow, loader::LoaderOptions::HeldOverflow::kCopy);
  EXPECT_FALSE(f.loader.augment.train);
  EXPECT_EQ(f.loader.augment.out_width(), 32);
  EXPECT_EQ(f.loader.augment.out_height(), 24);
  EXPECT_EQ(f.loader.augment.resize_size, 40);
  EXPECT_EQ(f.loader.augment.scale_min, 0.5);
  EXPECT_EQ(f.loader.augment.flip_probability, 0);
}

TEST(PipelineOptions, TheDefaultsAreTheLibrarysOwn) {
  const broadcast::FeederOptions f = internal::FeederOptionsFor(PipelineOptions{});
  const broadcast::FeederOptions feeder;
  EXPECT_EQ(f.read_ahead, feeder.read_ahead);
  EXPECT_EQ(f.depth, feeder.depth);
  EXPECT_EQ(f.timeout, feeder.timeout);
  EXPECT_EQ(f.loader.batch_size, feeder.loader.batch_size);
  EXPECT_EQ(f.loader.prefetch, feeder.loader.prefetch);
  EXPECT_EQ(f.loader.mean, feeder.loader.mean);
  EXPECT_EQ(f.loader.stddev, feeder.loader.stddev);
  EXPECT_EQ(f.loader.held_timeout, feeder.loader.held_timeout);
  EXPECT_EQ(f.loader.augment.size, feeder.loader.augment.size);
  EXPECT_EQ(f.loader.augment.scale_min, feeder.loader.augment.scale_min);
  EXPECT_EQ(f.loader.augment.ratio_max, feeder.loader.augment.ratio_max);
  EXPECT_EQ(f.loader.augment.flip_probability, feeder.loader.augment.flip_probability);
  EXPECT_EQ(f.sampler.padding, feeder.sampler.padding);
  EXPECT_EQ(f.sampler.permutation, feeder.sampler.permutation);
}

TEST(PipelineOptions, AValueOutOfRangeIsRefusedNamingItsSetting) {
  EXPECT_OK(internal::ValidatePipelineOptions(PipelineOptions{}));
  struct Case {
    const char* setting;
    void (*set)(PipelineOptions&);
  };
  const Case cases[] = {
      {"group_size", [](PipelineOptions& o) { o.group_size = 0; }},
      {"depth", [](PipelineOptions& o) { o.depth = 0; }},
      {"batch_size", [](PipelineOptions& o) { o.batch_size = 0; }},
      {"workers", [](PipelineOptions& o) { o.workers = -1; }},
      {"prefetch", [](PipelineOptions& o) { o.prefetch = 0; }},
      {"stddev", [](PipelineOptions& o) { o.stddev[1] = 0; }},
      {"image_size", [](PipelineOptions& o) { o.image_size = 0; }},
      {"scale_max", [](PipelineOptions& o) { o.scale_max = 1.5; }},
      {"ratio_min", [](PipelineOptions& o) { o.ratio_min = 0; }},
      {"flip_probability", [](PipelineOptions& o) { o.flip_probability = 2; }},
      {"held_batches", [](PipelineOptions& o) { o.held_batches = 0; }},
  };
  for (const Case& c : cases) {
    PipelineOptions o;
    c.set(o);
    const absl::Status st = internal::ValidatePipelineOptions(o);
    EXPECT_CODE(st, kInvalidArgument) << c.setting;
    EXPECT_NE(st.message().find(c.setting), absl::string_view::npos) << st;
    EXPECT_EQ(SettingsOf(st), std::vector<std::string>{c.setting});
  }
}

}  // namespace
}  // namespace ddpio
