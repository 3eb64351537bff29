// The pipeline's settings, each defined once: its name, type, default, range and help. The
// `ddpio` program's flags (--batch-size), the Python package's keywords (batch_size=), the names
// in --json output and the library's own check of a PipelineOptions all come from this table, so
// a setting means, defaults to and accepts the same everywhere.
//
//   PipelineOptions o;
//   DDPIO_RETURN_IF_ERROR(SetSetting(&o, "batch_size", SettingValue(uint64_t{256})));
//   DDPIO_RETURN_IF_ERROR(SetSettingText(&o, "padding", "mask"));   // as a command line gives it
//   const Setting* s = FindSetting("workers");   // s->help, s->min, s->max, s->get(o)
//
// A setting's name is its PipelineOptions field (store settings: their StoreOverrides field in the
// unit of the name, cache_gb), the Python keyword, the JSON name and, with '-' for '_', the flag.
// Not in the table, being no plain value: data (each front end's positional argument),
// store_settings (already resolved), cuda and copy_to_device (a device handle), cancel (a flag).
// Plain data and pure functions: thread-safe.
#ifndef DDPIO_PIPELINE_SETTINGS_H_
#define DDPIO_PIPELINE_SETTINGS_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ddpio/loader/loader.h"
#include "ddpio/pipeline/pipeline_options.h"

namespace ddpio {

enum class SettingType {
  kBool,
  kInt,       // int64_t
  kUnsigned,  // uint64_t
  kNumber,    // double
  kSeconds,   // a duration, given as a double of seconds (the field holds milliseconds)
  kChoice,    // one of `choices`, as text
  kText,      // any text
  kTriple,    // three numbers, one per colour channel
};

// A setting's value. std::monostate: not set — an optional store setting then takes the
// environment's value (storage/store_settings.h).
using SettingValue = std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string,
                                  std::array<double, 3>>;

struct Setting {
  std::string_view name;
  SettingType type;
  std::string_view help;
  // Numeric types: the inclusive range [min, max] (kSeconds: in seconds; kTriple: each number).
  double min = 0;
  double max = 0;
  bool min_open = false;  // the value must be above min (a timeout of 0 waits for nothing)
  bool nonzero = false;   // kTriple: no number may be 0 (a divisor)
  bool optional = false;  // may be not set (std::monostate): the environment's value then
  std::vector<std::string_view> choices;  // kChoice: the accepted names
  SettingValue (*get)(const PipelineOptions&) = nullptr;
  void (*put)(PipelineOptions&, const SettingValue&) = nullptr;  // a checked value only
};

// Every setting, grouped as pipeline_options.h groups them.
std::span<const Setting> PipelineSettings();
// The setting named `name`, or null.
const Setting* FindSetting(std::string_view name);

// `value` as `setting` takes it: converted to its type where that loses nothing (an integer for a
// number, an unsigned for an int and back while in range) and checked against its range and
// choices. InvalidArgument "<name> must be <what>, got <value>" with the setting attached
// (WithSetting) otherwise.
absl::StatusOr<SettingValue> CheckSetting(const Setting& setting, SettingValue value);
// The text a command line gives, parsed as `setting`'s type ("true"/"false" for a bool; "a,b,c"
// for a triple), then CheckSetting.
absl::StatusOr<SettingValue> ParseSetting(const Setting& setting, std::string_view text);

// Sets one setting of *options after checking it. NotFound naming it for an unknown name.
absl::Status SetSetting(PipelineOptions* options, std::string_view name, SettingValue value);
absl::Status SetSettingText(PipelineOptions* options, std::string_view name, std::string_view text);

// A value as text ("64", "true", "0.08", "shard", "0.485,0.456,0.406", "" when not set): what
// --help shows as a default and a group compares.
std::string SettingText(const SettingValue& value);
// What `setting` accepts, in words: "an integer in [1, 65536]", "one of shard, replicate".
std::string SettingRange(const Setting& setting);

// The loader's settings among `options` (what a Pipeline gives each of its loaders).
loader::LoaderOptions LoaderOptionsOf(const PipelineOptions& options);
// The sampler's settings among `options` for one reader (num_replicas 1 and dataset_size 0: the
// caller sets both).
sampler::SamplerOptions SamplerOptionsOf(const PipelineOptions& options);
// The object-store settings one reader of the pipeline uses in a job of `world_size` ranks,
// `local_world_size` of them on its node: the options' store_overrides and what the pipeline
// decides for each reader — with the block order, the records it keeps in use (per lane it reads:
// the window's chunks and what it reads ahead) and the order's chunk size; with the exact order,
// its first batch and the share of each chunk it (or its node) needs an epoch; with
// store_max_requests_per_s, its equal share of the job's rate.
storage::StoreOverrides ReaderStoreOverrides(const PipelineOptions& options, int world_size,
                                             int local_world_size = 1);

}  // namespace ddpio

#endif  // DDPIO_PIPELINE_SETTINGS_H_
