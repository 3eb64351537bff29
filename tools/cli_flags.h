// Flags several `ddpio` commands share, defined once so that the same flag means the same thing,
// takes the same range and says so in --help everywhere:
//   --workers N      loader decoding threads (train, bench loader, bench feed); 0: all cores
//   --threads N      threads of a one-shot tool (synth, convert, inspect, bench storage); 0: all
//   cores
//   --batch-size N, --image-size PX, --crop-scale MIN,MAX, --no-flip   the loader's batches
//   --timeout S      seconds any one collective, send or receive may wait
//   --store, --advertise-addr   the rendezvous; --mode, --payload, --readers, --relay,
//   --read-ahead     the group feeder; --json   one JSON object as the last stdout line
// Not shared, and so not the same everywhere: `--size` is a count of samples (sampler, bench
// sampler), bytes per message (bench comm) or pixels (synth), as each command's --help says;
// `sampler --batch-size` also takes 0 (print the stream without batching).
// Units are in the flag's name (--grace-seconds, --bucket-kb, --map-size-mb, --compute-ms) or, for
// --timeout, in its help.
#ifndef DDPIO_TOOLS_CLI_FLAGS_H_
#define DDPIO_TOOLS_CLI_FLAGS_H_

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

#include "absl/status/statusor.h"

namespace ddpio {
struct PipelineOptions;
}  // namespace ddpio
namespace ddpio::comm {
enum class LayoutKind;
}  // namespace ddpio::comm
namespace ddpio::loader {
struct LoaderOptions;
}  // namespace ddpio::loader
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
// --batch-size, --image-size, --workers, --crop-scale and --no-flip, into the loader's options.
void AddLoaderFlags(CLI::App* app, loader::LoaderOptions* options);
void AddLoaderFlags(CLI::App* app, PipelineOptions* options);
// --timeout (seconds, 1 .. 86400) into *timeout.
void AddTimeoutFlag(CLI::App* app, std::chrono::milliseconds* timeout, const std::string& what);
// --json: `per_rank` when every rank prints its own object.
void AddJsonFlag(CLI::App* app, bool* json, bool per_rank = false);

// --cache-dir DIR and --cache-gb N for a dataset in an object store (s3://): a local folder of
// fetched records that later epochs and later processes read instead of the store, and its
// budget. Written into *store (cache_dir, cache_bytes), which the command passes on in the
// ReaderOptions or PipelineOptions it opens its datasets with: a flag given wins over
// DDPIO_S3_CACHE_DIR / DDPIO_S3_CACHE_GB (storage/store_settings.h). Ignored for a local dataset.
void AddCacheFlags(CLI::App* app, storage::StoreOverrides* store);
// The rendezvous flags every multi-rank command takes: --store and --advertise-addr.
void AddRendezvousFlags(CLI::App* app, std::string* store, std::string* advertise_addr);
// The group feeder's flags: --mode, --payload, --readers, --relay, --read-ahead, --depth.
void AddFeederFlags(CLI::App* app, PipelineOptions* options);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CLI_FLAGS_H_
