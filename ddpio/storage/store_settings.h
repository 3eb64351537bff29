// StoreSettings: everything about reaching the object store that holds an s3:// dataset — its
// endpoint, region and credentials (s3/s3_config.h) and the remote reader's options (the memory
// budget, the coalescing gap, how long a failing store is retried, the local cache folder and its
// budget; remote/remote_dataset.h) — and the one function that resolves them from a process
// environment and the values a caller set explicitly.
//
// Nothing below reads the environment on its own: a program either resolves the settings at its
// edge and passes them down (ReaderOptions::store_settings, PipelineOptions::store_settings), or
// passes only the values it sets (store_overrides: what `ddpio`'s --cache-dir and --cache-gb
// fill in) and DatasetReader resolves them from the process environment once per open — the one
// place the library calls this with CurrentEnvironment() (dataset_reader.h). Either way whatever
// the caller sets explicitly wins over the environment, and the environment over the defaults.
//
//   StoreOverrides flags;                   // what the command line said
//   flags.cache_dir = "/scratch/cache";
//   DDPIO_ASSIGN_OR_RETURN(StoreSettings s, ResolveStoreSettings(CurrentEnvironment(), flags));
//   ReaderOptions o;
//   o.store_settings = s;
//
// The variables, each read only when the matching override is not set:
//   AWS_* and ~/.aws/...      the endpoint, region and credentials, as the AWS tools read them
//   DDPIO_S3_CACHE_DIR        cache_dir: a local folder of fetched records (default: none)
//   DDPIO_S3_CACHE_GB         cache_bytes, in GiB (> 0; default 16)
//   DDPIO_S3_MEMORY_MB        memory_bytes, in MiB (>= 1; default 256)
//   DDPIO_S3_COALESCE_KB      coalesce_gap, in KiB (default 64)
//   DDPIO_S3_OUTAGE_SECONDS   retry.give_up_after, in seconds (> 0, at most a week; default 300)
//   DDPIO_S3_MAX_IN_FLIGHT    in_flight_limit: the most GETs a reader keeps in flight, a
//                             connection each (1-256; default 128: its window opens from 16 to
//                             it; 16 or less: that many, fixed)
// Pure functions (the AWS shared files excepted, read when no s3 override is given); thread-safe.
#ifndef DDPIO_STORAGE_STORE_SETTINGS_H_
#define DDPIO_STORAGE_STORE_SETTINGS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/common/environment.h"
#include "ddpio/storage/remote/remote_options.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::storage {

// Resolved: what an open of an s3:// dataset uses, as it is.
struct StoreSettings {
  // The store's endpoint, region and credentials.
  s3::S3Config s3;
  // The remote reader's options; those no variable names (request size, GETs in flight, the
  // retry backoff) keep RemoteOptions' defaults, for a caller to change after resolving.
  remote::RemoteOptions remote;
};

// Values a caller sets explicitly (a command-line flag, a test, a program): each one given wins
// over its variable; nullopt (the default of each) leaves it to the environment, then to the
// default. Explicit values are taken as they are (a command line checks its flags' ranges).
struct StoreOverrides {
  // The endpoint, region and credentials, whole: given, no AWS_* variable or AWS shared file is
  // read (how a test reaches its in-memory store, an endpoint memory://NAME).
  std::optional<s3::S3Config> s3;
  // Instead of DDPIO_S3_CACHE_DIR; "" means no cache folder, whatever the variable says.
  std::optional<std::string> cache_dir;
  std::optional<uint64_t> cache_bytes;                     // instead of DDPIO_S3_CACHE_GB
  std::optional<uint64_t> memory_bytes;                    // instead of DDPIO_S3_MEMORY_MB
  std::optional<uint64_t> coalesce_gap;                    // instead of DDPIO_S3_COALESCE_KB
  std::optional<std::chrono::milliseconds> give_up_after;  // instead of DDPIO_S3_OUTAGE_SECONDS
  std::optional<bool> whole_chunks;                        // instead of DDPIO_S3_WHOLE_CHUNKS
  std::optional<int> in_flight_limit;                      // instead of DDPIO_S3_MAX_IN_FLIGHT
  // RemoteOptions::chunk_order_records: set by the pipeline for the block order (no variable).
  std::optional<uint64_t> chunk_order_records;
  std::optional<uint64_t> order_chunk_records;    // RemoteOptions::order_chunk_records, likewise
  std::optional<uint64_t> first_batch_records;    // RemoteOptions::first_batch_records, likewise
  std::optional<double> max_requests_per_s;       // RemoteOptions::max_requests_per_s (no variable)
  std::optional<remote::ChunkShare> chunk_share;  // RemoteOptions::chunk_share, set by the pipeline
  // RemoteOptions::preloaded: the manifest and index another rank fetched (no variable).
  std::shared_ptr<const remote::RemoteIndexBytes> preloaded_index;
};

// The settings from `env` (normally CurrentEnvironment()) with every value in `explicit_values`
// winning over the environment's: a variable whose value is given is not read at all.
// InvalidArgument naming the variable and its value for a DDPIO_S3_* that is read and does not
// parse or is out of range ("DDPIO_S3_CACHE_GB=abc is not a size in GiB (> 0)"); without an s3
// override, S3ConfigFromEnvironment's errors (FailedPrecondition when there are no credentials,
// InvalidArgument for a bad endpoint or profile).
absl::StatusOr<StoreSettings> ResolveStoreSettings(const Environment& env,
                                                   const StoreOverrides& explicit_values = {});

// Every value given in `explicit_values` in place of the one in *settings (what
// ResolveStoreSettings ends with, and what DatasetReader does to settings it is given).
void ApplyStoreOverrides(const StoreOverrides& explicit_values, StoreSettings* settings);

}  // namespace ddpio::storage

#endif  // DDPIO_STORAGE_STORE_SETTINGS_H_
