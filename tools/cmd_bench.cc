// CLI glue for `ddpio bench storage|sampler|loader|comm|feed`: one function per command.
#include <memory>

#include "ddpio/comm/backend.h"
#include "tools/bench_comm.h"
#include "tools/bench_decode.h"
#include "tools/bench_feed.h"
#include "tools/bench_loader.h"
#include "tools/bench_sampler.h"
#include "tools/bench_storage.h"
#include "tools/cli_commands.h"
#include "tools/cli_flags.h"
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

// The repetitions every benchmark reports the median of.
CLI::Option* AddRepeatFlag(CLI::App* app, int* repeat, const std::string& what) {
  return app->add_option("--repeat", *repeat, what + "; figures are medians")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
}

void AddBenchStorage(CLI::App* bench, std::vector<Command>* commands) {
  auto* app = bench->add_subcommand(
      "storage",
      "Read records through the dataset reader vs a plain file copy (s3://: vs the store's own "
      "range GETs, and its bulk rate a GET per block-order chunk)");
  app->footer(
      "Example: ddpio bench storage --data /data/train.lmdb --order random --threads 2\n"
      "         ddpio bench storage --data s3://bucket/train --order random --repeat 3");
  auto o = std::make_shared<BenchStorageOptions>();
  auto order = std::make_shared<std::string>("sequential");
  auto json = std::make_shared<bool>(false);
  app->add_option("--data", o->data, "Dataset path")->required();
  AddCacheFlags(app, &o->store);
  app->add_option("--order", *order, "Record order")
      ->capture_default_str()
      ->check(CLI::IsMember({"sequential", "random"}));
  AddThreadsFlag(app, &o->threads, "Reading threads");
  AddRepeatFlag(app, &o->repeat, "Rounds");
  app->add_option("--seed", o->seed, "Seed of the random order")->capture_default_str();
  AddJsonFlag(app, json.get());
  commands->push_back({app, [=] {
                         o->random_order = *order == "random";
                         auto result = BenchStorage(*o);
                         if (!result.ok()) return ReportError("bench storage", result.status());
                         return PrintResult(*json, *result, BenchStorageText);
                       }});
}

void AddBenchSampler(CLI::App* bench, std::vector<Command>* commands) {
  auto* app =
      bench->add_subcommand("sampler", "One epoch's permutation plus one rank's share, vs PyTorch");
  app->footer(
      "Defaults: ImageNet-1k (1,281,167 samples), 64 ranks. PyTorch is timed in the same run\n"
      "when a python3 with torch is found (Debian: python3-torch).");
  auto o = std::make_shared<BenchSamplerOptions>();
  auto json = std::make_shared<bool>(false);
  auto no_torch = std::make_shared<bool>(false);
  app->add_option("--size", o->size, "Dataset size")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, sampler::kMaxSamples));
  app->add_option("--world", o->world, "World size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app->add_option("--rank", o->rank, "Rank whose share is computed")->capture_default_str();
  AddRepeatFlag(app, &o->repeat, "Epochs timed");
  AddEnumOption(app, "--permutation", &o->permutation, sampler::ParsePermutationKind,
                sampler::PermutationKindName, "torch, torch-legacy or feistel");
  app->add_flag("--no-torch", *no_torch, "Do not time PyTorch");
  AddJsonFlag(app, json.get());
  commands->push_back({app, [=] {
                         o->compare_torch = !*no_torch;
                         auto result = BenchSampler(*o);
                         if (!result.ok()) return ReportError("bench sampler", result.status());
                         return PrintResult(*json, *result, BenchSamplerText);
                       }});
}

void AddBenchLoader(CLI::App* bench, std::vector<Command>* commands) {
  auto* app = bench->add_subcommand("loader", "Loader images/s next to the full-decode ceiling");
  app->footer("Example: ddpio bench loader --data /data/train.lmdb --workers 2 --batch-size 64");
  auto o = std::make_shared<BenchLoaderOptions>();
  auto json = std::make_shared<bool>(false);
  app->add_option("--data", o->data, "Dataset path")->required();
  AddCacheFlags(app, &o->settings);
  AddLoaderFlags(app, &o->settings);
  AddSettingFlags(app, &o->settings, {"output"});
  AddOrderFlags(app, &o->settings);
  app->add_flag_callback(
      "--eval", [o] { o->settings.train = false; },
      "Evaluation geometry (resize shorter side + center crop; the setting train false)");
  app->add_option("--epochs", o->epochs, "Epochs; figures are medians")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option("--warmup-epochs", o->warmup_epochs,
                  "Epochs run first and left out of the figures (a first epoch pays once for what "
                  "training pays once: slot memory, first reads of the dataset's pages); their "
                  "images/s are printed apart. 0: measure from the first epoch")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app->add_option(
         "--sample-images", o->ceiling_images,
         "Records used by the ceiling, crop-decode and comparison lines (N spread evenly over the "
         "dataset)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app->add_option_function<std::string>(
         "--huffman", [o](const std::string& v) { o->own_huffman = v == "ddpio"; },
         "Entropy decoder for restart-marked JPEGs: ddpio (its own, two segments at once; the "
         "default) or libjpeg (libjpeg-turbo's, for comparison)")
      ->check(CLI::IsMember({"ddpio", "libjpeg"}));
  AddJsonFlag(app, json.get());
  commands->push_back({app, [=] {
                         auto result = BenchLoader(*o);
                         if (!result.ok()) return ReportError("bench loader", result.status());
                         return PrintResult(*json, *result, BenchLoaderText);
                       }});
}

void AddBenchDecode(CLI::App* bench, std::vector<Command>* commands) {
  auto* app = bench->add_subcommand(
      "decode",
      "One thread: libjpeg's and ddpio's Huffman decoders on the same restart-marked images");
  app->footer(
      "Times, on one thread and in turn every round: the full decode without restart markers (the "
      "loader's ceiling), with them through libjpeg's and ddpio's entropy decoders, the same at "
      "1/8 "
      "scale (nearly all entropy decoding), and the loader's whole per-sample work in fast and "
      "exact mode with either decoder.\n"
      "Example: ddpio bench decode --data /data/train.lmdb --sample-images 200 --rounds 5");
  auto o = std::make_shared<BenchDecodeOptions>();
  auto json = std::make_shared<bool>(false);
  app->add_option("--data", o->data, "Dataset path (local)")->required();
  app->add_option("--sample-images", o->images,
                  "Records decoded (N spread evenly over the dataset; those with restart markers)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app->add_option("--rounds", o->rounds, "Rounds; figures are medians")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app->add_option("--image-size", o->image_size, "The samples' output size in pixels")
      ->capture_default_str()
      ->check(CLI::Range(1, 8192));
  AddJsonFlag(app, json.get());
  commands->push_back({app, [=] {
                         auto result = BenchDecode(*o);
                         if (!result.ok()) return ReportError("bench decode", result.status());
                         return PrintResult(*json, *result, BenchDecodeText);
                       }});
}

void AddBenchComm(CLI::App* bench, std::vector<Command>* commands) {
  auto* app = bench->add_subcommand(
      "comm", "Collective bandwidth and latency vs plain TCP (run under ddpio launch)");
  app->footer(
      "Example: ddpio launch --nproc-per-node 4 -- ddpio bench comm --size 67108864 --group-size "
      "2\n"
      "Rank 0 prints the result; the ceiling is plain TCP between ranks 0 and 1 in the same run.");
  auto o = std::make_shared<BenchCommOptions>();
  auto json = std::make_shared<bool>(false);
  app->add_option("--backend", o->backend,
                  "gloo (CPU, TCP), nccl (needs a CUDA device), or auto: nccl when a device is "
                  "usable, else gloo")
      ->capture_default_str()
      ->check(ParsedBy(comm::ParseBackend, "gloo|nccl|auto"));
  app->add_option("--size", o->size, "Bytes per operation")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{4}, uint64_t{1} << 30));
  AddRepeatFlag(app, &o->repeat, "Repetitions");
  app->add_option("--group-size", o->group_size,
                  "Run within groups of this size (default: the world)")
      ->check(CLI::Range(1, 1 << 20));
  AddLayoutFlag(app, &o->layout);
  AddRendezvousFlags(app, &o->store, &o->advertise_addr);
  app->add_flag("--json", *json, "Rank 0 prints one JSON object as its last stdout line");
  commands->push_back({app, [=] {
                         auto result = BenchComm(*o);
                         if (!result.ok()) return ReportError("bench comm", result.status());
                         if (result->empty()) return kExitOk;
                         return PrintResult(*json, *result, BenchCommText);
                       }});
}

void AddBenchFeed(CLI::App* bench, std::vector<Command>* commands) {
  auto* app = bench->add_subcommand(
      "feed", "Group feeding: leaders read, peers receive (run under ddpio launch)");
  app->footer(
      "Every rank prints its own result line. Compare --group-size 1 (every rank reads for "
      "itself)\n"
      "with 2, 4, ... on the same ranks. Example:\n"
      "  ddpio launch --nproc-per-node 4 -- ddpio bench feed --data /data/train.lmdb --group-size "
      "2 --json\n"
      "shard: each rank gets the DistributedSampler's indices for itself; replicate: every member "
      "of a\n"
      "group gets the group's batches. encoded: the leader sends stored records, each rank decodes "
      "its\n"
      "own; decoded: the leader decodes and augments for the group and sends ready batches.\n"
      "--backend nccl (GPU ranks): decoded batches go device to device (ncclBroadcast / grouped\n"
      "ncclSend+Recv) and arrive in device memory; encoded records still travel over Gloo, since\n"
      "every member decodes them on its CPU. Without a usable CUDA device every rank fails at "
      "once.\n"
      "Ceiling: before each epoch and after the last, every rank decodes --ceiling-images records\n"
      "spread over the dataset (tjDecompress2, full decode) with as many decoders at once as its\n"
      "loaders have workers (none on a member sent decoded batches), all ranks together\n"
      "(a barrier before and after each round): the job's decoders sharing the cores as while it\n"
      "feeds. Each rank prints its ceiling and its images/s against it (ratio); the ranks'\n"
      "ceilings sum to the job's.");
  auto o = std::make_shared<BenchFeedOptions>();
  PipelineOptions* p = &o->pipeline;
  p->batch_size = 64;
  auto json = std::make_shared<bool>(false);
  app->add_option("--data", p->data, "Dataset path (opened by group leaders only)")->required();
  AddCacheFlags(app, p);
  app->add_option("--backend", o->backend,
                  "gloo (CPU, TCP, host memory), nccl (needs a CUDA device on every rank), or "
                  "auto: nccl when "
                  "a device is usable, else gloo")
      ->capture_default_str()
      ->check(ParsedBy(comm::ParseBackend, "gloo|nccl|auto"));
  AddFeederFlags(app, p);
  AddLoaderFlags(app, p);
  app->add_option("--epochs", o->epochs, "Epochs fed")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app->add_option(
         "--ceiling-images", o->ceiling_images,
         "Records each ceiling round decodes (N spread evenly over the dataset); 0: no ceiling")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 40));
  app->add_option("--indices-out", o->indices_out,
                  "Write the indices each rank received to PREFIX.rank<r>.txt");
  AddSettingFlags(app, p, {"seed", "padding", "permutation", "output"});
  AddOrderFlags(app, p);
  AddRendezvousFlags(app, &o->store, &o->advertise_addr);
  AddJsonFlag(app, json.get(), /*per_rank=*/true);
  commands->push_back({app, [=] {
                         auto result = BenchFeed(*o);
                         if (!result.ok()) return ReportError("bench feed", result.status());
                         return PrintResult(*json, *result, BenchFeedText);
                       }});
}

}  // namespace

void AddBenchCommands(CLI::App& root, std::vector<Command>* commands) {
  auto* bench = root.add_subcommand(
      "bench", "Throughput benchmarks, each next to a ceiling measured in the same run");
  AddBenchStorage(bench, commands);
  AddBenchSampler(bench, commands);
  AddBenchLoader(bench, commands);
  AddBenchDecode(bench, commands);
  AddBenchComm(bench, commands);
  AddBenchFeed(bench, commands);
}

}  // namespace ddpio::tools
