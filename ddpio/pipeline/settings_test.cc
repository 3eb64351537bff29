#include "ddpio/pipeline/settings.h"

#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "ddpio/common/status_macros.h"
#include "ddpio/pipeline/internal/feeder_options.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio {
namespace {

// A value of `s` other than its default and inside its range (the far end for a number).
SettingValue OtherValue(const Setting& s, const SettingValue& value) {
  switch (s.type) {
    case SettingType::kBool:
      return std::holds_alternative<bool>(value) ? !std::get<bool>(value) : false;
    case SettingType::kInt:
      return static_cast<int64_t>(std::get<int64_t>(value) == s.min ? s.min + 1 : s.min);
    case SettingType::kUnsigned:
      return static_cast<uint64_t>(s.min + (std::get<uint64_t>(value) == s.min + 1 ? 2 : 1));
    case SettingType::kNumber:
    case SettingType::kSeconds: {
      const double far = std::isfinite(s.max) ? s.max : s.min + 7;
      const double* now = std::get_if<double>(&value);
      return now != nullptr && *now == far ? (s.min + s.max) / 2 : far;
    }
    case SettingType::kChoice:
      return std::string(s.choices[0] == std::get<std::string>(value) ? s.choices[1]
                                                                      : s.choices[0]);
    case SettingType::kText:
      return std::string("/some/folder");
    case SettingType::kTriple:
      return std::array<double, 3>{0.25, -2, 3};
  }
  return std::monostate{};
}

TEST(Settings, NamesAreUniqueAndEverySettingIsDescribed) {
  std::set<std::string_view> names;
  for (const Setting& s : PipelineSettings()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_FALSE(s.help.empty()) << s.name;
    EXPECT_NE(s.get, nullptr) << s.name;
    EXPECT_NE(s.put, nullptr) << s.name;
    EXPECT_EQ(FindSetting(s.name), &s);
    if (s.type == SettingType::kChoice) {
      EXPECT_GE(s.choices.size(), 2u) << s.name;
    }
  }
  EXPECT_EQ(FindSetting("no_such_setting"), nullptr);
  EXPECT_GE(names.size(), 38u);
}

TEST(Settings, TheDefaultsAreInsideTheTablesRanges) {
  const PipelineOptions defaults;
  for (const Setting& s : PipelineSettings()) {
    EXPECT_OK(CheckSetting(s, s.get(defaults)).status()) << s.name;
  }
  EXPECT_OK(internal::ValidatePipelineOptions(defaults));
}

TEST(Settings, EverySettingWritesItsOwnFieldAndReadsItBack) {
  const PipelineOptions defaults;
  for (const Setting& s : PipelineSettings()) {
    PipelineOptions o;
    const SettingValue before = s.get(o);
    const SettingValue other = OtherValue(s, before);
    ASSERT_OK(SetSetting(&o, s.name, other)) << s.name;
    EXPECT_EQ(SettingText(s.get(o)), SettingText(other)) << s.name;
    EXPECT_NE(SettingText(s.get(o)), SettingText(before)) << s.name;
    // No other setting moved: each entry's get and put name the same field.
    for (const Setting& t : PipelineSettings()) {
      if (&t != &s) {
        EXPECT_EQ(SettingText(t.get(o)), SettingText(t.get(defaults)))
            << s.name << " moved " << t.name;
      }
    }
  }
}

TEST(Settings, EveryChoiceIsANameTheLibraryParses) {
  for (const Setting& s : PipelineSettings()) {
    for (std::string_view choice : s.choices) {
      PipelineOptions o;
      ASSERT_OK(SetSettingText(&o, s.name, choice)) << s.name;
      // The library's own Name of what its Parse made of the choice: the table's name.
      EXPECT_EQ(SettingText(s.get(o)), choice) << s.name;
    }
  }
}

TEST(Settings, AValueOutsideTheRangeIsRefusedNamingTheSettingAndTheRange) {
  for (const Setting& s : PipelineSettings()) {
    if (s.type != SettingType::kInt && s.type != SettingType::kNumber &&
        s.type != SettingType::kSeconds) {
      continue;
    }
    PipelineOptions o;
    const std::string before = SettingText(s.get(o));
    const double below = s.min_open ? s.min : s.min - 1;
    const absl::Status st = SetSetting(&o, s.name, below);
    EXPECT_CODE(st, kInvalidArgument) << s.name;
    EXPECT_NE(st.message().find(std::string(s.name) + " must be " + SettingRange(s)),
              std::string::npos)
        << st;
    EXPECT_EQ(SettingsOf(st), std::vector<std::string>{std::string(s.name)});
    if (std::isfinite(s.max)) {
      EXPECT_CODE(SetSetting(&o, s.name, s.max * 2 + 1), kInvalidArgument) << s.name;
    }
    EXPECT_CODE(SetSetting(&o, s.name, std::nan("")), kInvalidArgument) << s.name;
    EXPECT_EQ(SettingText(s.get(o)), before) << s.name << ": a refused value was written";
  }
}

TEST(Settings, ValuesAreConvertedOnlyWhereNothingIsLost) {
  PipelineOptions o;
  ASSERT_OK(SetSetting(&o, "flip_probability", int64_t{1}));  // an integer for a number
  EXPECT_EQ(o.flip_probability, 1.0);
  ASSERT_OK(SetSetting(&o, "batch_size", int64_t{8}));  // a signed integer for an unsigned one
  EXPECT_EQ(o.batch_size, 8u);
  ASSERT_OK(SetSetting(&o, "seed", ~uint64_t{0}));  // the whole unsigned range
  EXPECT_EQ(o.seed, ~uint64_t{0});
  EXPECT_CODE(SetSetting(&o, "batch_size", int64_t{-3}), kInvalidArgument);
  EXPECT_CODE(SetSetting(&o, "batch_size", 2.5), kInvalidArgument);  // a number for an integer
  EXPECT_CODE(SetSetting(&o, "workers", true), kInvalidArgument);    // a bool for an integer
  EXPECT_CODE(SetSetting(&o, "shuffle", int64_t{1}), kInvalidArgument);
  EXPECT_CODE(SetSetting(&o, "mode", std::string("broadcast")), kInvalidArgument);
  EXPECT_CODE(SetSetting(&o, "batch_size", std::monostate{}), kInvalidArgument);  // not optional
  EXPECT_CODE(SetSetting(&o, "stddev", std::array<double, 3>{1, 0, 1}), kInvalidArgument);
  EXPECT_CODE(SetSetting(&o, "nonsense", int64_t{1}), kNotFound);
  EXPECT_EQ(o.batch_size, 8u);
}

TEST(Settings, TextFromACommandLineIsParsedAsTheSettingsType) {
  PipelineOptions o;
  ASSERT_OK(SetSettingText(&o, "timeout", "2.5"));
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(2500));
  ASSERT_OK(SetSettingText(&o, "mean", "0.5,0.25,0"));
  EXPECT_EQ(o.mean, (std::array<float, 3>{0.5f, 0.25f, 0}));
  ASSERT_OK(SetSettingText(&o, "shuffle", "false"));
  EXPECT_FALSE(o.shuffle);
  ASSERT_OK(SetSettingText(&o, "seed", "18446744073709551615"));
  EXPECT_EQ(o.seed, ~uint64_t{0});
  EXPECT_CODE(SetSettingText(&o, "batch_size", "12abc"), kInvalidArgument);
  EXPECT_CODE(SetSettingText(&o, "mean", "0.5,0.5"), kInvalidArgument);
  EXPECT_CODE(SetSettingText(&o, "timeout", "inf"), kInvalidArgument);
  EXPECT_CODE(SetSettingText(&o, "timeout", "0"), kInvalidArgument);  // waits for nothing
  const absl::Status st = SetSettingText(&o, "padding", "sideways");
  EXPECT_NE(st.message().find("padding must be one of pad, drop, none, mask, got \"sideways\""),
            std::string::npos)
      << st;
}

TEST(Settings, AStoreSettingNotSetLeavesTheEnvironmentsValue) {
  PipelineOptions o;
  EXPECT_TRUE(std::holds_alternative<std::monostate>(FindSetting("cache_gb")->get(o)));
  EXPECT_FALSE(o.store_overrides.cache_bytes.has_value());
  ASSERT_OK(SetSettingText(&o, "cache_gb", "2"));
  EXPECT_EQ(o.store_overrides.cache_bytes, uint64_t{2} << 30);
  EXPECT_CODE(SetSettingText(&o, "cache_gb", "0"), kInvalidArgument);
  ASSERT_OK(SetSetting(&o, "cache_gb", std::monostate{}));
  EXPECT_FALSE(o.store_overrides.cache_bytes.has_value());
  ASSERT_OK(SetSettingText(&o, "cache_dir", ""));  // explicitly none
  EXPECT_EQ(o.store_overrides.cache_dir, std::optional<std::string>(""));
}

TEST(Settings, CrossedRangeEndsAreRefusedByTheCheck) {
  PipelineOptions o;
  o.scale_min = 0.9;
  o.scale_max = 0.5;
  const absl::Status st = internal::ValidatePipelineOptions(o);
  EXPECT_CODE(st, kInvalidArgument);
  EXPECT_EQ(SettingsOf(st), std::vector<std::string>{"scale_min"});
  o = PipelineOptions{};
  o.ratio_min = 2;
  o.ratio_max = 1;
  EXPECT_EQ(SettingsOf(internal::ValidatePipelineOptions(o)),
            std::vector<std::string>{"ratio_min"});
}

TEST(Settings, TheLoadersOptionsComeFromThePipelines) {
  PipelineOptions o;
  ASSERT_OK(SetSettingText(&o, "batch_size", "7"));
  ASSERT_OK(SetSettingText(&o, "image_size", "40"));
  ASSERT_OK(SetSettingText(&o, "bad_samples", "skip"));
  const loader::LoaderOptions l = LoaderOptionsOf(o);
  EXPECT_EQ(l.batch_size, 7u);
  EXPECT_EQ(l.augment.size, 40);
  EXPECT_EQ(l.bad_samples, loader::BadSamplePolicy::kSkip);
}

TEST(Settings, EachReaderGetsItsShareOfTheJobsRequestRate) {
  PipelineOptions o;
  EXPECT_FALSE(ReaderStoreOverrides(o, 8).max_requests_per_s.has_value()) << "no cap by default";
  o.store_max_requests_per_s = 800;
  EXPECT_EQ(ReaderStoreOverrides(o, 8).max_requests_per_s, 100.0) << "8 ranks, each reads";
  o.group_size = 4;
  EXPECT_EQ(ReaderStoreOverrides(o, 8).max_requests_per_s, 400.0) << "two leaders read";
  o.readers = broadcast::FeedReaders::kAll;
  EXPECT_EQ(ReaderStoreOverrides(o, 8).max_requests_per_s, 100.0) << "every member reads";
  EXPECT_EQ(ReaderStoreOverrides(o, 1).max_requests_per_s, 800.0);
  o.store_overrides.cache_dir = "/scratch";
  EXPECT_EQ(ReaderStoreOverrides(o, 8).cache_dir, "/scratch") << "the options' own kept";
}

TEST(Settings, TheBlockOrdersRecordsInUseCountEveryLaneAReaderReads) {
  PipelineOptions o;
  o.order = sampler::Order::kBlock;
  o.block_chunk = 10;
  o.block_window = 3;
  o.batch_size = 4;
  const uint64_t one_lane = (3 + 2) * 10 + loader::RemoteLookaheadRecords(4);
  EXPECT_EQ(ReaderStoreOverrides(o, 1).chunk_order_records, one_lane);
  EXPECT_EQ(ReaderStoreOverrides(o, 1).order_chunk_records, 10u);
  o.group_size = 2;  // a shard-mode leader reads its group's two streams
  EXPECT_EQ(ReaderStoreOverrides(o, 4).chunk_order_records, 2 * one_lane);
  o.group_size = 1;
  o.block_lanes = 8;  // resumed from a world of 8 on 4: two lanes a stream
  EXPECT_EQ(ReaderStoreOverrides(o, 4).chunk_order_records, 2 * one_lane);
  o.order = sampler::Order::kExact;
  EXPECT_FALSE(ReaderStoreOverrides(o, 4).chunk_order_records.has_value());
}

// In the exact order, the share of each chunk a reader needs an epoch: its streams of the job's
// (a rank's own samples in shard mode, a group's stream in replicate); with a cache folder its
// node's ranks share, the node's streams. None in the block order (its chunks are its own).
TEST(Settings, InTheExactOrderAReaderNeedsItsStreamsShareOfEachChunk) {
  PipelineOptions o;
  auto shares = [&](int world, int local) {
    const auto s = ReaderStoreOverrides(o, world, local).chunk_share;
    EXPECT_TRUE(s.has_value());
    return s.has_value() ? std::pair(s->alone, s->folder) : std::pair(-1.0, -1.0);
  };
  EXPECT_EQ(shares(1, 1), std::pair(1.0, 1.0));
  EXPECT_EQ(shares(8, 2), std::pair(1.0 / 8, 2.0 / 8)) << "4 nodes of 2 ranks";
  EXPECT_EQ(shares(8, 8), std::pair(1.0 / 8, 1.0)) << "one node: the folder holds every chunk";
  EXPECT_EQ(shares(8, 1), std::pair(1.0 / 8, 1.0 / 8)) << "the node's size unknown";
  EXPECT_EQ(shares(4, 16), std::pair(1.0 / 4, 1.0)) << "a node of more ranks than the job";
  o.group_size = 2;  // shard mode: a leader reads its group's two streams
  EXPECT_EQ(shares(8, 2), std::pair(2.0 / 8, 2.0 / 8));
  o.mode = broadcast::FeedMode::kReplicate;  // 4 groups of 2: 4 streams, a node's one group one
  EXPECT_EQ(shares(8, 2), std::pair(1.0 / 4, 1.0 / 4));
  EXPECT_EQ(shares(8, 4), std::pair(1.0 / 4, 2.0 / 4));
  o.group_size = 8;  // one group spanning the nodes: one stream
  EXPECT_EQ(shares(8, 2), std::pair(1.0, 1.0));
  o.order = sampler::Order::kBlock;
  EXPECT_FALSE(ReaderStoreOverrides(o, 8, 2).chunk_share.has_value());
}

// In the exact order, the first batch a reader reads is fetched record by record ahead of its
// chunks: its own batch, or its group's batches when a shard-mode leader reads for the group. Not
// in the block order.
TEST(Settings, AReaderFetchesItsFirstBatchesRecordsAheadOfTheirChunks) {
  PipelineOptions o;
  o.batch_size = 32;
  EXPECT_EQ(ReaderStoreOverrides(o, 8).first_batch_records, 32u);
  o.group_size = 4;
  EXPECT_EQ(ReaderStoreOverrides(o, 8).first_batch_records, 4 * 32u) << "a leader, 4 streams";
  o.mode = broadcast::FeedMode::kReplicate;
  EXPECT_EQ(ReaderStoreOverrides(o, 8).first_batch_records, 32u) << "one stream, replicated";
  o.mode = broadcast::FeedMode::kShard;
  o.readers = broadcast::FeedReaders::kAll;
  EXPECT_EQ(ReaderStoreOverrides(o, 8).first_batch_records, 32u) << "each member reads its own";
  o.order = sampler::Order::kBlock;
  EXPECT_FALSE(ReaderStoreOverrides(o, 8).first_batch_records.has_value());
}

}  // namespace
}  // namespace ddpio
