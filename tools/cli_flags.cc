#include "tools/cli_flags.h"

#include <cmath>
#include <cstdlib>

#include "ddpio/comm/group_layout.h"
#include "ddpio/loader/loader.h"
#include "ddpio/pipeline/pipeline_options.h"
#include "ddpio/storage/store_settings.h"
#include "tools/cli_util.h"

namespace ddpio::tools {

const CLI::Validator& FiniteNumber() {
  static const CLI::Validator* v = new CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(x))
          return "must be a finite number";
        return "";
      },
      "FINITE");
  return *v;
}

CLI::Option* AddThreadsFlag(CLI::App* app, int* threads, const std::string& what) {
  return app->add_option("--threads", *threads, what + " (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
}

namespace {

// The loader's flags into wherever the command keeps the settings they name.
struct LoaderFlagTargets {
  uint64_t* batch_size;
  int* image_size;
  int* workers;
  double* scale_min;
  double* scale_max;
  double* flip_probability;
  loader::BadSamplePolicy* bad_samples;
};

void AddLoaderFlagsTo(CLI::App* app, const LoaderFlagTargets& o) {
  app->add_option("--batch-size", *o.batch_size, "Samples per batch (per rank)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 16));
  app->add_option("--image-size", *o.image_size, "Side of the output images in pixels")
      ->capture_default_str()
      ->check(CLI::Range(1, 8192));
  app->add_option("--workers", *o.workers, "Decoding threads per loader (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  app->add_option_function<std::string>(
         "--crop-scale",
         [o](const std::string& text) {
           if (!ParseScaleRange(text, o.scale_min, o.scale_max)) {
             throw CLI::ValidationError("--crop-scale", "takes MIN,MAX with 0 < MIN <= MAX <= 1");
           }
         },
         "RandomResizedCrop scale range MIN,MAX")
      ->default_str("0.08,1");
  app->add_flag_callback(
      "--no-flip", [o] { *o.flip_probability = 0.0; }, "No random horizontal flip");
  AddEnumOption(app, "--bad-samples", o.bad_samples, loader::ParseBadSamplePolicy,
                loader::BadSamplePolicyName,
                "A record that cannot be decoded: fail (stop, naming index, key and source file) "
                "or skip (zero "
                "pixels flagged invalid, counted and listed)");
}

constexpr char kLayoutHelp[] =
    "Group layout: contiguous (consecutive ranks, groups within a node) or strided (one rank per "
    "node in each "
    "group)";

}  // namespace

void AddLoaderFlags(CLI::App* app, loader::LoaderOptions* o) {
  AddLoaderFlagsTo(app, {&o->batch_size, &o->augment.size, &o->workers, &o->augment.scale_min,
                         &o->augment.scale_max, &o->augment.flip_probability, &o->bad_samples});
}

void AddLoaderFlags(CLI::App* app, PipelineOptions* o) {
  AddLoaderFlagsTo(app, {&o->batch_size, &o->image_size, &o->workers, &o->scale_min, &o->scale_max,
                         &o->flip_probability, &o->bad_samples});
}

CLI::Option* AddLayoutFlag(CLI::App* app, std::string* layout) {
  return app->add_option("--layout", *layout, kLayoutHelp)
      ->capture_default_str()
      ->check(ParsedBy(comm::ParseLayoutKind, "contiguous|strided"));
}

CLI::Option* AddLayoutFlag(CLI::App* app, comm::LayoutKind* layout) {
  return AddEnumOption(app, "--layout", layout, comm::ParseLayoutKind, comm::LayoutKindName,
                       kLayoutHelp);
}

void AddTimeoutFlag(CLI::App* app, std::chrono::milliseconds* timeout, const std::string& what) {
  app->add_option_function<int>(
         "--timeout", [timeout](int seconds) { *timeout = std::chrono::seconds(seconds); },
         "Seconds " + what + " may wait")
      ->default_str(
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(*timeout).count()))
      ->check(CLI::Range(1, 86400));
}

void AddJsonFlag(CLI::App* app, bool* json, bool per_rank) {
  app->add_flag("--json", *json,
                per_rank ? "Print one JSON object per rank as its last stdout line"
                         : "Print one JSON object as the last stdout line");
}

void AddCacheFlags(CLI::App* app, storage::StoreOverrides* store) {
  app->add_option_function<std::string>(
         "--cache-dir", [store](const std::string& dir) { store->cache_dir = dir; },
         "With an s3:// dataset: a local folder of fetched records, read by later epochs and "
         "later runs instead of the store (instead of DDPIO_S3_CACHE_DIR; safe to share between "
         "ranks and jobs)")
      ->type_name("DIR");
  app->add_option_function<double>(
         "--cache-gb",
         [store](double gb) { store->cache_bytes = static_cast<uint64_t>(gb * (1 << 30)); },
         "With --cache-dir: its budget in GiB, oldest records evicted first (default 16; instead "
         "of DDPIO_S3_CACHE_GB)")
      ->check(FiniteNumber())
      ->check(CLI::PositiveNumber)
      ->check(CLI::Range(0.0, 1e6))  // as DDPIO_S3_CACHE_GB's
      ->type_name("GB");
}

void AddRendezvousFlags(CLI::App* app, std::string* store, std::string* advertise_addr) {
  app->add_option("--store", *store,
                  "Rendezvous store: default TCP on rank 0 (MASTER_ADDR:MASTER_PORT), or file:DIR");
  app->add_option(
      "--advertise-addr", *advertise_addr,
      "Address peers reach this rank on (default: DDPIO_ADVERTISE_ADDR, else GLOO_SOCKET_IFNAME's "
      "address, else this host's route to MASTER_ADDR)");
}

void AddFeederFlags(CLI::App* app, PipelineOptions* o) {
  AddEnumOption(app, "--mode", &o->mode, broadcast::ParseFeedMode, broadcast::FeedModeName,
                "shard (data parallel: each rank its own samples) or replicate (every member gets "
                "the group's "
                "batches)");
  AddEnumOption(app, "--payload", &o->payload, broadcast::ParseFeedPayload,
                broadcast::FeedPayloadName,
                "encoded (stored records travel, every rank decodes its own) or decoded (the "
                "leader decodes and "
                "sends ready batches)");
  AddEnumOption(app, "--readers", &o->readers, broadcast::ParseFeedReaders,
                broadcast::FeedReadersName,
                "leader (the group's leader reads for it) or all (every rank reads its own stream "
                "itself: the "
                "baseline without group feeding)");
  AddEnumOption(app, "--relay", &o->relay, broadcast::ParseFeedRelay, broadcast::FeedRelayName,
                "replicate: chain (each member forwards to the next as data arrives; every link "
                "carries it once) or "
                "star (the leader sends every member a copy)");
  app->add_option("--read-ahead", o->read_ahead,
                  "Records a leader asks storage for ahead of the one it copies (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app->add_option("--depth", o->depth, "Messages a leader may run ahead of each member")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
}

}  // namespace ddpio::tools
