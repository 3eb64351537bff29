#include "ddpio/pipeline/settings.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/pipeline/internal/feeder_options.h"
#include "ddpio/sampler/permutation.h"

namespace ddpio {
namespace {

constexpr double kNoLimit = std::numeric_limits<double>::infinity();
constexpr double kWeek = 7 * 86400.0;
constexpr double kGiB = double{1 << 30};

// A field's value as a SettingValue, and back (the value already checked: of the field's
// SettingType, in range).
SettingValue Widen(bool v) { return v; }
SettingValue Widen(int v) { return int64_t{v}; }
SettingValue Widen(uint64_t v) { return v; }
SettingValue Widen(double v) { return v; }
SettingValue Widen(std::chrono::milliseconds v) { return v.count() / 1000.0; }
SettingValue Widen(const std::array<float, 3>& v) {
  return std::array<double, 3>{v[0], v[1], v[2]};
}

void Narrow(const SettingValue& v, bool* out) { *out = std::get<bool>(v); }
void Narrow(const SettingValue& v, int* out) { *out = static_cast<int>(std::get<int64_t>(v)); }
void Narrow(const SettingValue& v, uint64_t* out) { *out = std::get<uint64_t>(v); }
void Narrow(const SettingValue& v, double* out) { *out = std::get<double>(v); }
void Narrow(const SettingValue& v, std::chrono::milliseconds* out) {
  *out = std::chrono::milliseconds(std::llround(std::get<double>(v) * 1000.0));
}
void Narrow(const SettingValue& v, std::array<float, 3>* out) {
  const auto& a = std::get<std::array<double, 3>>(v);
  for (int i = 0; i < 3; ++i) (*out)[i] = static_cast<float>(a[i]);
}

template <auto M>
SettingValue Get(const PipelineOptions& o) {
  return Widen(o.*M);
}
template <auto M>
void Put(PipelineOptions& o, const SettingValue& v) {
  Narrow(v, &(o.*M));
}

// An enum field, as the library names it (Name) and reads a name (Parse).
template <auto M, auto Name, auto Parse>
SettingValue GetEnum(const PipelineOptions& o) {
  return std::string(Name(o.*M));
}
template <auto M, auto Name, auto Parse>
void PutEnum(PipelineOptions& o, const SettingValue& v) {
  auto parsed = Parse(std::get<std::string>(v));
  if (parsed.ok()) o.*M = *parsed;  // a checked choice always parses (SettingsTest)
}

// The store settings: explicit values of StoreOverrides, not set by default (the environment's).
SettingValue Widen(const std::string& v) { return v; }
void Narrow(const SettingValue& v, std::string* out) { *out = std::get<std::string>(v); }

template <auto M>
SettingValue GetStore(const PipelineOptions& o) {
  const auto& value = o.store_overrides.*M;
  if (!value.has_value()) return std::monostate{};
  return Widen(*value);
}
template <auto M>
void PutStore(PipelineOptions& o, const SettingValue& v) {
  auto& value = o.store_overrides.*M;
  if (std::holds_alternative<std::monostate>(v)) {
    value.reset();
  } else {
    value.emplace();
    Narrow(v, &*value);
  }
}
SettingValue GetCacheGb(const PipelineOptions& o) {
  if (!o.store_overrides.cache_bytes.has_value()) return std::monostate{};
  return static_cast<double>(*o.store_overrides.cache_bytes) / kGiB;
}
void PutCacheGb(PipelineOptions& o, const SettingValue& v) {
  if (std::holds_alternative<std::monostate>(v)) {
    o.store_overrides.cache_bytes.reset();
  } else {
    o.store_overrides.cache_bytes = static_cast<uint64_t>(std::get<double>(v) * kGiB);
  }
}

// A numeric setting in [min, max].
Setting Numeric(std::string_view name, SettingType type, double min, double max,
                std::string_view help, SettingValue (*get)(const PipelineOptions&),
                void (*put)(PipelineOptions&, const SettingValue&)) {
  Setting s{name, type, help};
  s.min = min;
  s.max = max;
  s.get = get;
  s.put = put;
  return s;
}
Setting Flag(std::string_view name, std::string_view help,
             SettingValue (*get)(const PipelineOptions&),
             void (*put)(PipelineOptions&, const SettingValue&)) {
  return Numeric(name, SettingType::kBool, 0, 0, help, get, put);
}
Setting Choice(std::string_view name, std::vector<std::string_view> choices, std::string_view help,
               SettingValue (*get)(const PipelineOptions&),
               void (*put)(PipelineOptions&, const SettingValue&)) {
  Setting s = Numeric(name, SettingType::kChoice, 0, 0, help, get, put);
  s.choices = std::move(choices);
  return s;
}
// A setting that may be not set (std::monostate: the environment's value).
Setting Optional(Setting s) {
  s.optional = true;
  return s;
}
// A numeric setting whose value must be above its min, not equal to it.
Setting Above(Setting s) {
  s.min_open = true;
  return s;
}
Setting Triple(std::string_view name, bool nonzero, std::string_view help,
               SettingValue (*get)(const PipelineOptions&),
               void (*put)(PipelineOptions&, const SettingValue&)) {
  Setting s = Numeric(name, SettingType::kTriple, -kNoLimit, kNoLimit, help, get, put);
  s.nonzero = nonzero;
  return s;
}

using P = PipelineOptions;
using T = SettingType;

std::vector<Setting> MakeTable() {
  using loader::LoaderOptions;
  std::vector<Setting> t = {
      // --- The group ---
      Numeric("group_size", T::kInt, 1, 1 << 20,
              "Ranks per group; only the group's leader reads storage and feeds its peers (1: "
              "every rank reads for itself); must divide the world size",
              Get<&P::group_size>, Put<&P::group_size>),
      Choice("layout", {"contiguous", "strided"},
             "Which ranks form a group: contiguous (consecutive ranks, a group within a node) or "
             "strided (one rank of each node in each group)",
             GetEnum<&P::layout, comm::LayoutKindName, comm::ParseLayoutKind>,
             PutEnum<&P::layout, comm::LayoutKindName, comm::ParseLayoutKind>),
      Choice("mode", {"shard", "replicate"},
             "shard (data parallel: each rank its own samples) or replicate (every member gets "
             "its group's batches)",
             GetEnum<&P::mode, broadcast::FeedModeName, broadcast::ParseFeedMode>,
             PutEnum<&P::mode, broadcast::FeedModeName, broadcast::ParseFeedMode>),
      Choice("payload", {"encoded", "decoded"},
             "encoded (stored records travel, every rank decodes its own) or decoded (the leader "
             "decodes and augments for the group and sends ready batches)",
             GetEnum<&P::payload, broadcast::FeedPayloadName, broadcast::ParseFeedPayload>,
             PutEnum<&P::payload, broadcast::FeedPayloadName, broadcast::ParseFeedPayload>),
      Choice("readers", {"leader", "all"},
             "leader (the group's leader reads for it) or all (every rank reads its own stream: "
             "the baseline without group feeding)",
             GetEnum<&P::readers, broadcast::FeedReadersName, broadcast::ParseFeedReaders>,
             PutEnum<&P::readers, broadcast::FeedReadersName, broadcast::ParseFeedReaders>),
      Choice("relay", {"chain", "star"},
             "With mode replicate: chain (each member forwards to the next as data arrives; every "
             "link carries it once) or star (the leader sends every member a copy)",
             GetEnum<&P::relay, broadcast::FeedRelayName, broadcast::ParseFeedRelay>,
             PutEnum<&P::relay, broadcast::FeedRelayName, broadcast::ParseFeedRelay>),
      Numeric("read_ahead", T::kInt, 0, 1 << 20,
              "Records a leader asks storage for ahead of the one it copies (0: none)",
              Get<&P::read_ahead>, Put<&P::read_ahead>),
      Numeric("depth", T::kInt, 1, 1024, "Messages a leader may run ahead of each peer",
              Get<&P::depth>, Put<&P::depth>),
      Above(Numeric("timeout", T::kSeconds, 0, kWeek,
                    "Seconds any one send, receive or collective (and joining the job) may wait",
                    Get<&P::timeout>, Put<&P::timeout>)),
      // --- A dataset in an object store ---
      Optional(Numeric("cache_dir", T::kText, 0, 0,
                       "With an s3:// dataset: a local folder of fetched records, read by later "
                       "epochs and later runs instead of the store; the ranks of a node that "
                       "share one fetch each chunk once between them (safe to share between "
                       "jobs too; not set: DDPIO_S3_CACHE_DIR; empty: none)",
                       GetStore<&storage::StoreOverrides::cache_dir>,
                       PutStore<&storage::StoreOverrides::cache_dir>)),
      Optional(Above(Numeric("cache_gb", T::kNumber, 0, 1e6,
                             "With cache_dir: its budget in GiB, oldest records evicted first "
                             "(not set: DDPIO_S3_CACHE_GB, else 16)",
                             GetCacheGb, PutCacheGb))),
      Optional(Flag("whole_chunks",
                    "With an s3:// dataset that fits the cache (its folder's budget, else "
                    "memory's): fetch a whole chunk of records (up to 8 MiB) with any record of "
                    "it, about one GET per chunk an epoch instead of one per record; true: "
                    "whatever share of each chunk a reader needs (not set: DDPIO_S3_WHOLE_CHUNKS, "
                    "else on where the reader, or its node with a shared cache folder, needs at "
                    "least half of each chunk an epoch)",
                    GetStore<&storage::StoreOverrides::whole_chunks>,
                    PutStore<&storage::StoreOverrides::whole_chunks>)),
      Numeric("store_max_requests_per_s", T::kNumber, 0, 1e9,
              "With an s3:// dataset: requests a second the whole job may send the store (0: no "
              "cap; each reading rank takes an equal share). Either way a reader slows down when "
              "the store answers 503 SlowDown or 429 or times out, and speeds up again after",
              Get<&P::store_max_requests_per_s>, Put<&P::store_max_requests_per_s>),
      // --- The sampler ---
      Flag("shuffle", "Shuffle each epoch (torch's DistributedSampler)", Get<&P::shuffle>,
           Put<&P::shuffle>),
      Numeric("seed", T::kUnsigned, 0, kNoLimit,
              "The sampler's seed: epoch e is shuffled with seed + e, as torch's", Get<&P::seed>,
              Put<&P::seed>),
      Choice("padding", {"pad", "drop", "none", "mask"},
             "A world that does not divide the dataset: pad (torch's), drop (drop_last=True), "
             "none (uneven shares) or mask (padding flagged invalid: every sample exactly once)",
             GetEnum<&P::padding, sampler::PaddingName, sampler::ParsePadding>,
             PutEnum<&P::padding, sampler::PaddingName, sampler::ParsePadding>),
      Choice("permutation", {"torch", "torch-legacy", "feistel"},
             "The shuffle's permutation: torch (current PyTorch's randperm), torch-legacy or "
             "feistel (no memory: beyond 2^33 samples)",
             GetEnum<&P::permutation, sampler::PermutationKindName, sampler::ParsePermutationKind>,
             PutEnum<&P::permutation, sampler::PermutationKindName, sampler::ParsePermutationKind>),
      Choice("order", {"exact", "block"},
             "exact (torch's DistributedSampler order) or block (chunks of block_chunk records "
             "permuted each epoch, every reader shuffling within block_window chunks of its own: "
             "an object store is read a whole chunk per GET with a bounded cache)",
             GetEnum<&P::order, sampler::OrderName, sampler::ParseOrder>,
             PutEnum<&P::order, sampler::OrderName, sampler::ParseOrder>),
      Numeric("block_chunk", T::kUnsigned, 1, 1 << 24,
              "Block order: records per chunk (consecutive indices, fetched by one GET from an "
              "object store: 128 ~ 12 MB of 100 KB images)",
              Get<&P::block_chunk>, Put<&P::block_chunk>),
      Numeric("block_window", T::kUnsigned, 1, 1 << 24,
              "Block order: chunks a reader's shuffle spreads over (its cache holds about "
              "window + 2 chunks)",
              Get<&P::block_window>, Put<&P::block_window>),
      Numeric("block_lanes", T::kUnsigned, 0, 1 << 24,
              "Block order: lanes the chunks are dealt to (0: one per reader; a resumed job keeps "
              "the lanes its checkpoint or state recorded)",
              Get<&P::block_lanes>, Put<&P::block_lanes>),
      Flag("warn_repeated_epoch",
           "Warn when a shuffled epoch is started twice from its start (a forgotten epoch change)",
           Get<&P::warn_repeated_epoch>, Put<&P::warn_repeated_epoch>),
      // --- Batches ---
      Numeric("seq_len", T::kUnsigned, 0, 1 << 24,
              "Token datasets: ids per training sequence (documents packed into windows of "
              "seq_len + 1 ids, a sample each); 0 for an image dataset",
              Get<&P::seq_len>, Put<&P::seq_len>),
      Numeric("batch_size", T::kUnsigned, 1, 1 << 16, "Samples per batch (per rank)",
              Get<&P::batch_size>, Put<&P::batch_size>),
      Flag("drop_last", "Drop a short last batch (DataLoader's drop_last)", Get<&P::drop_last>,
           Put<&P::drop_last>),
      Numeric("workers", T::kInt, 0, 1024, "Decoding threads per loader (0: the cores available)",
              Get<&P::workers>, Put<&P::workers>),
      Numeric("prefetch", T::kInt, 1, 1024, "Batches assembled ahead of the consumer",
              Get<&P::prefetch>, Put<&P::prefetch>),
      Choice("output", {"uint8", "float"},
             "uint8 (NHWC, the stored pixels: 4x less host-to-device traffic) or float (NCHW, "
             "normalised with mean and stddev)",
             GetEnum<&P::output, loader::OutputFormatName, loader::ParseOutputFormat>,
             PutEnum<&P::output, loader::OutputFormatName, loader::ParseOutputFormat>),
      Triple("mean", false, "Float output: the mean subtracted per channel (x / 255 - mean)",
             Get<&P::mean>, Put<&P::mean>),
      Triple("stddev", true, "Float output: the divisor per channel", Get<&P::stddev>,
             Put<&P::stddev>),
      Choice("decode", {"fast", "exact"},
             "fast (only the crop's region, DCT-scaled) or exact (torchvision's pixels: a full "
             "decode, then crop and resize)",
             GetEnum<&P::decode, loader::DecodeModeName, loader::ParseDecodeMode>,
             PutEnum<&P::decode, loader::DecodeModeName, loader::ParseDecodeMode>),
      Choice("bad_samples", {"fail", "skip"},
             "A record that cannot be decoded: fail (stop, naming index, key and source file) or "
             "skip (zero pixels flagged invalid, counted and listed)",
             GetEnum<&P::bad_samples, loader::BadSamplePolicyName, loader::ParseBadSamplePolicy>,
             PutEnum<&P::bad_samples, loader::BadSamplePolicyName, loader::ParseBadSamplePolicy>),
      // --- Augmentation ---
      Flag("train", "RandomResizedCrop + horizontal flip (true) or Resize + CenterCrop (false)",
           Get<&P::train>, Put<&P::train>),
      Numeric("image_size", T::kInt, 1, 8192,
              "Output width in pixels, and height unless image_height is set", Get<&P::image_size>,
              Put<&P::image_size>),
      Numeric("image_height", T::kInt, 0, 8192, "Output height in pixels (0: image_size)",
              Get<&P::image_height>, Put<&P::image_height>),
      Numeric("resize_size", T::kInt, 0, 16384,
              "Evaluation: the shorter side before the center crop (0: the larger output side * "
              "256 / 224)",
              Get<&P::resize_size>, Put<&P::resize_size>),
      Above(Numeric("scale_min", T::kNumber, 0, 1, "RandomResizedCrop: the least area fraction",
                    Get<&P::scale_min>, Put<&P::scale_min>)),
      Above(Numeric("scale_max", T::kNumber, 0, 1, "RandomResizedCrop: the largest area fraction",
                    Get<&P::scale_max>, Put<&P::scale_max>)),
      Above(Numeric("ratio_min", T::kNumber, 0, 1000, "RandomResizedCrop: the least aspect ratio",
                    Get<&P::ratio_min>, Put<&P::ratio_min>)),
      Above(Numeric("ratio_max", T::kNumber, 0, 1000, "RandomResizedCrop: the largest aspect ratio",
                    Get<&P::ratio_max>, Put<&P::ratio_max>)),
      Numeric("flip_probability", T::kNumber, 0, 1, "Probability of a horizontal flip (0: no flip)",
              Get<&P::flip_probability>, Put<&P::flip_probability>),
      Numeric("augment_seed", T::kUnsigned, 0, kNoLimit,
              "The augmentation's seed: sample i's crop and flip in epoch e depend on it, i and e "
              "only",
              Get<&P::augment_seed>, Put<&P::augment_seed>),
      // --- Memory ---
      Flag("prefetch_records", "Ask the OS for a batch's records at once before reading them",
           Get<&P::prefetch_records>, Put<&P::prefetch_records>),
      Numeric("held_batches", T::kInt, 1, 1 << 20,
              "Batches the consumer may hold at once through NextHeld()", Get<&P::held_batches>,
              Put<&P::held_batches>),
      Numeric("held_timeout", T::kSeconds, 0, kWeek,
              "Seconds NextHeld() waits for a release with held_batches held",
              Get<&P::held_timeout>, Put<&P::held_timeout>),
      Choice("held_overflow", {"wait", "copy"},
             "NextHeld() with held_batches held: wait (held_timeout, then an error) or copy (hand "
             "out a copy at once)",
             GetEnum<&P::held_overflow, loader::HeldOverflowName, loader::ParseHeldOverflow>,
             PutEnum<&P::held_overflow, loader::HeldOverflowName, loader::ParseHeldOverflow>),
  };
  return t;
}

// Debian's Abseil has a string_view of its own.
absl::string_view A(std::string_view v) { return {v.data(), v.size()}; }

std::string Bound(double v) {
  if (v == kNoLimit) return "inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrCat(v);
}

absl::Status Refuse(const Setting& s, const std::string& got) {
  return WithSetting(absl::InvalidArgumentError(
                         absl::StrCat(A(s.name), " must be ", SettingRange(s), ", got ", got)),
                     s.name);
}

bool InRange(const Setting& s, double v) {
  if (!std::isfinite(v)) return false;
  if (s.min_open ? !(v > s.min) : !(v >= s.min)) return false;
  return v <= s.max;
}

// `value` as an integer of `type`, or nullopt.
template <typename I>
std::optional<I> AsInteger(const SettingValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) {
    if (std::is_unsigned_v<I> && *i < 0) return std::nullopt;
    return static_cast<I>(*i);
  }
  if (const auto* u = std::get_if<uint64_t>(&value)) {
    if (std::is_signed_v<I> && *u > uint64_t{std::numeric_limits<int64_t>::max()})
      return std::nullopt;
    return static_cast<I>(*u);
  }
  return std::nullopt;
}

std::optional<double> AsNumber(const SettingValue& value) {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&value)) return static_cast<double>(*u);
  return std::nullopt;
}

}  // namespace

std::span<const Setting> PipelineSettings() {
  static const std::vector<Setting>* table = new std::vector<Setting>(MakeTable());
  return *table;
}

const Setting* FindSetting(std::string_view name) {
  for (const Setting& s : PipelineSettings()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string SettingText(const SettingValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) {
          return "";
        } else if constexpr (std::is_same_v<V, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<V, std::array<double, 3>>) {
          return absl::StrCat(v[0], ",", v[1], ",", v[2]);
        } else {
          return absl::StrCat(v);
        }
      },
      value);
}

std::string SettingRange(const Setting& s) {
  const std::string range = s.max == kNoLimit ? absl::StrCat("at least ", Bound(s.min))
                                              : absl::StrCat("in ", s.min_open ? "(" : "[",
                                                             Bound(s.min), ", ", Bound(s.max), "]");
  switch (s.type) {
    case T::kBool:
      return "true or false";
    case T::kInt:
    case T::kUnsigned:
      return absl::StrCat("an integer ", range);
    case T::kNumber:
      return absl::StrCat("a number ", range);
    case T::kSeconds:
      return absl::StrCat("a number of seconds ", range);
    case T::kChoice:
      return absl::StrCat(
          "one of ", absl::StrJoin(s.choices, ", ",
                                   [](std::string* out, std::string_view c) { out->append(c); }));
    case T::kText:
      return "text";
    case T::kTriple:
      return s.nonzero ? "three finite numbers, none 0" : "three finite numbers";
  }
  return "";
}

absl::StatusOr<SettingValue> CheckSetting(const Setting& s, SettingValue value) {
  if (std::holds_alternative<std::monostate>(value)) {
    if (s.optional) return value;
    return Refuse(s, "nothing");
  }
  const std::string got = SettingText(value);
  switch (s.type) {
    case T::kBool:
      if (std::holds_alternative<bool>(value)) return value;
      return Refuse(s, got);
    case T::kInt: {
      const std::optional<int64_t> i = AsInteger<int64_t>(value);
      if (!i.has_value() || !InRange(s, static_cast<double>(*i))) return Refuse(s, got);
      return SettingValue(*i);
    }
    case T::kUnsigned: {
      const std::optional<uint64_t> u = AsInteger<uint64_t>(value);
      if (!u.has_value() || !InRange(s, static_cast<double>(*u))) return Refuse(s, got);
      return SettingValue(*u);
    }
    case T::kNumber:
    case T::kSeconds: {
      const std::optional<double> d = AsNumber(value);
      if (!d.has_value() || !InRange(s, *d)) return Refuse(s, got);
      return SettingValue(*d);
    }
    case T::kChoice:
    case T::kText: {
      const auto* text = std::get_if<std::string>(&value);
      if (text == nullptr) return Refuse(s, got);
      if (s.type == T::kText) return value;
      for (std::string_view c : s.choices) {
        if (c == *text) return value;
      }
      return Refuse(s, absl::StrCat("\"", *text, "\""));
    }
    case T::kTriple: {
      const auto* a = std::get_if<std::array<double, 3>>(&value);
      if (a == nullptr) return Refuse(s, got);
      for (double v : *a) {
        if (!std::isfinite(v) || (s.nonzero && v == 0)) return Refuse(s, got);
      }
      return value;
    }
  }
  return Refuse(s, got);
}

absl::StatusOr<SettingValue> ParseSetting(const Setting& s, std::string_view view) {
  const std::string text(view);
  switch (s.type) {
    case T::kBool: {
      bool b = false;
      if (!absl::SimpleAtob(text, &b)) return Refuse(s, text);
      return SettingValue(b);
    }
    case T::kInt:
    case T::kUnsigned: {
      int64_t i = 0;
      uint64_t u = 0;
      if (absl::SimpleAtoi(text, &i)) return CheckSetting(s, SettingValue(i));
      if (absl::SimpleAtoi(text, &u)) return CheckSetting(s, SettingValue(u));
      return Refuse(s, absl::StrCat("\"", text, "\""));
    }
    case T::kNumber:
    case T::kSeconds: {
      double d = 0;
      if (!absl::SimpleAtod(text, &d)) return Refuse(s, absl::StrCat("\"", text, "\""));
      return CheckSetting(s, SettingValue(d));
    }
    case T::kTriple: {
      std::vector<std::string> parts = absl::StrSplit(text, ',');
      std::array<double, 3> a{};
      if (parts.size() != 3) return Refuse(s, absl::StrCat("\"", text, "\""));
      for (int i = 0; i < 3; ++i) {
        if (!absl::SimpleAtod(parts[i], &a[i])) return Refuse(s, absl::StrCat("\"", text, "\""));
      }
      return CheckSetting(s, SettingValue(a));
    }
    case T::kChoice:
    case T::kText:
      return CheckSetting(s, SettingValue(text));
  }
  return Refuse(s, text);
}

absl::Status SetSetting(PipelineOptions* options, std::string_view name, SettingValue value) {
  const Setting* s = FindSetting(name);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("no setting named ", A(name)));
  DDPIO_ASSIGN_OR_RETURN(SettingValue checked, CheckSetting(*s, std::move(value)));
  s->put(*options, checked);
  return absl::OkStatus();
}

absl::Status SetSettingText(PipelineOptions* options, std::string_view name,
                            std::string_view text) {
  const Setting* s = FindSetting(name);
  if (s == nullptr) return absl::NotFoundError(absl::StrCat("no setting named ", A(name)));
  DDPIO_ASSIGN_OR_RETURN(SettingValue checked, ParseSetting(*s, text));
  s->put(*options, checked);
  return absl::OkStatus();
}

loader::LoaderOptions LoaderOptionsOf(const PipelineOptions& options) {
  return internal::FeederOptionsFor(options).loader;
}

sampler::SamplerOptions SamplerOptionsOf(const PipelineOptions& options) {
  return internal::FeederOptionsFor(options).sampler;
}

storage::StoreOverrides ReaderStoreOverrides(const PipelineOptions& o, int world_size,
                                             int local_world_size) {
  storage::StoreOverrides x = o.store_overrides;
  const uint64_t world = static_cast<uint64_t>(std::max(1, world_size));
  const uint64_t group = static_cast<uint64_t>(std::max(1, o.group_size));
  const bool shard = o.mode == broadcast::FeedMode::kShard;
  const bool leaders_read = o.readers == broadcast::FeedReaders::kLeader;
  // A shard-mode leader reads its group's streams, each its own batches.
  const uint64_t streams_read = shard && leaders_read ? group : 1;
  // The job's streams: each rank's in shard mode, each group's in replicate.
  const uint64_t streams = shard ? world : std::max<uint64_t>(1, world / group);
  if (o.order == sampler::Order::kExact) {
    // In the exact order a first batch touches up to a batch of whole chunks (8 MiB each): its
    // records come alone first. Not in the block order, the order for many readers: there a
    // first batch waits for at most its window's chunks, and a batch of GETs per reader at a
    // job's start is what a store's per-prefix request limit feels most (docs/PERFORMANCE.md).
    x.first_batch_records = streams_read * std::max<uint64_t>(1, o.batch_size);
    // The share of each chunk a reader needs an epoch: its streams of the job's; with a cache
    // folder its node's ranks share, theirs (a group within the node reads one stream; a group
    // spanning nodes, one a node).
    const uint64_t node_ranks = std::clamp<uint64_t>(local_world_size, 1, world);
    const uint64_t node_streams = shard ? node_ranks : std::max<uint64_t>(1, node_ranks / group);
    auto share = [&](uint64_t of) {
      return std::min(1.0, static_cast<double>(of) / static_cast<double>(streams));
    };
    x.chunk_share = storage::remote::ChunkShare{share(streams_read), share(node_streams)};
  }
  if (o.order == sampler::Order::kBlock) {
    // A stream reads lanes / streams lanes when a resumed job kept more lanes than it has
    // streams.
    const uint64_t lanes_per_stream =
        o.block_lanes > streams ? (o.block_lanes + streams - 1) / streams : 1;
    x.chunk_order_records =
        streams_read * lanes_per_stream *
        ((o.block_window + 2) * o.block_chunk + loader::RemoteLookaheadRecords(o.batch_size));
    x.order_chunk_records = o.block_chunk;
  }
  if (o.store_max_requests_per_s > 0) {
    const uint64_t readers = leaders_read ? std::max<uint64_t>(1, world / group) : world;
    x.max_requests_per_s = o.store_max_requests_per_s / static_cast<double>(readers);
  }
  return x;
}

}  // namespace ddpio
