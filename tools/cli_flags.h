// Flags several `ddpio` commands share, defined once so that the same flag means the same thing,
// takes the same range and says so in --help everywhere. A pipeline setting's flag comes from the
// settings table (ddpio/pipeline/settings.h): --batch-size is batch_size with its type, default,
// range and help, checked by the library's own rule:
//   --workers N      loader decoding threads (train, bench loader, bench feed); 0: all cores
//   --threads N      threads of a one-shot tool (synth, convert, inspect, bench storage); 0: all
//   cores
//   --batch-size N, --image-size PX, --crop-scale MIN,MAX, --no-flip   the loader's batches
//   --timeout S      seconds any one collective, send or receive may wait
//   --store, --advertise-addr   the rendezvous; --group-size, --layout, --mode, --payload,
//   --readers, --relay, --read-ahead, --depth, --timeout   the group feeder; --json   one JSON
//   object as the last stdout line
// Not shared, and so not the same everywhere: `--size` is a count of samples (sampler, bench
// sampler), bytes per message (bench comm) or pixels (synth), as each command's --help says;
// `sampler --batch-size` also takes 0 (print the stream without batching).
// Units are in the flag's name (--grace-seconds, --bucket-kb, --map-size-mb, --compute-ms) or, for
// --timeout, in its help.
#ifndef DDPIO_TOOLS_CLI_FLAGS_H_
#define DDPIO_TOOLS_CLI_FLAGS_H_

#include <CLI/CLI.hpp>
#include <chrono>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ddpio {
struct PipelineOptions;
}  // namespace ddpio
namespace ddpio::comm {
enum class LayoutKind;
}  // namespace ddpio::comm
namespace ddpio::storage {
struct StoreOverrides;
}  // namespace ddpio::storage

namespace ddpio::tools {

// An option naming one of an enum's values, parsed by the library's own Parse function while the
// command line is parsed: a wrong name is a usage error listing the accepted names, and *out is
// only ever set to a parsed value (it keeps its default, shown in --help, when the option is
// absent). Parse: absl::StatusOr<E>(std::string_view); name: std::string(E).
template <typename E, typename Parse, typename Name>
CLI::Option* AddEnumOption(CLI::App* app, const std::string& flag, E* out, Parse parse, Name name,
                           const std::string& help) {
  return app
      ->add_option_function<std::string>(
          flag,
          [out, parse, flag](const std::string& text) {
            auto value = parse(text);
            if (!value.ok())
              throw CLI::ValidationError(flag, std::string(value.status().message()));
            *out = *value;
          },
          help)
      ->default_str(name(*out));
}

// A string option's values checked by the library's own Parse function (absl::StatusOr<E>(
// std::string_view)) while the command line is parsed: the library's list of names is the only one.
template <typename Parse>
CLI::Validator ParsedBy(Parse parse, const std::string& names) {
  return CLI::Validator(
      [parse](std::string& text) {
        auto value = parse(text);
        return value.ok() ? std::string() : std::string(value.status().message());
      },
      names);
}

// --layout contiguous|strided (the group layout, comm/group_layout.h), into a string the command
// passes on.
CLI::Option* AddLayoutFlag(CLI::App* app, std::string* layout);
CLI::Option* AddLayoutFlag(CLI::App* app, comm::LayoutKind* layout);

// Refuses NaN and infinities (CLI::Range lets NaN through: every comparison with it is false).
const CLI::Validator& FiniteNumber();

// --threads: 0 (all cores) .. 1024.
CLI::Option* AddThreadsFlag(CLI::App* app, int* threads, const std::string& what);
// One flag per named setting of the settings table, into *options: --name-with-dashes, taking
// the table's type and range, its default what *options holds when the flag is added (a command
// sets its own defaults first). A bool setting is one flag: --no-NAME when it is on, --NAME when
// off. An unknown name is a programming error (std::logic_error, when the command is built).
void AddSettingFlags(CLI::App* app, PipelineOptions* options,
                     std::initializer_list<std::string_view> names);
// --batch-size, --image-size, --workers, --prefetch, --decode, --bad-samples, and two shorthands:
// --crop-scale MIN,MAX (scale_min, scale_max) and --no-flip (flip_probability 0).
void AddLoaderFlags(CLI::App* app, PipelineOptions* options);
// --json: `per_rank` when every rank prints its own object.
void AddJsonFlag(CLI::App* app, bool* json, bool per_rank = false);

// --cache-dir DIR, --cache-gb N and --no-whole-chunks (the settings cache_dir, cache_gb and
// whole_chunks) for a dataset in an object store (s3://): a local folder of fetched records that
// later epochs and later processes read instead of the store, its budget, and whether a dataset
// that fits is fetched a whole chunk at a time. Written into the store overrides the command passes
// on in the ReaderOptions or PipelineOptions it opens its datasets with: a flag given wins over
// DDPIO_S3_CACHE_DIR / DDPIO_S3_CACHE_GB (storage/store_settings.h). Ignored for a local dataset.
void AddCacheFlags(CLI::App* app, PipelineOptions* options);
void AddCacheFlags(CLI::App* app, storage::StoreOverrides* store);
// The rendezvous flags every multi-rank command takes: --store and --advertise-addr.
void AddRendezvousFlags(CLI::App* app, std::string* store, std::string* advertise_addr);
// The sample order's flags: --order, --block-chunk, --block-window, --block-lanes.
void AddOrderFlags(CLI::App* app, PipelineOptions* options);
// The group feeder's flags: --group-size, --layout, --mode, --payload, --readers, --relay,
// --read-ahead, --depth, --timeout.
void AddFeederFlags(CLI::App* app, PipelineOptions* options);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CLI_FLAGS_H_
