// CLI glue for `ddpio bench ...`.
#include <iostream>
#include <memory>

#include "tools/bench_storage.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/sampler_cli.h"
#include "tools/bench_loader.h"
#include "tools/bench_comm.h"
#include "tools/bench_feed.h"

namespace ddpio::tools {

void AddBenchCommands(CLI::App& root, std::vector<Command>* commands) {
  auto* bench = root.add_subcommand("bench", "Throughput benchmarks, each next to a ceiling measured in the same run");
  auto* app = bench->add_subcommand("storage", "Read records through the dataset reader vs a plain file copy");
  app->footer("Example: ddpio bench storage --data /data/train.lmdb --order random --threads 2");
  auto o = std::make_shared<BenchStorageOptions>();
  auto order = std::make_shared<std::string>("sequential");
  auto json = std::make_shared<bool>(false);
  app->add_option("--data", o->data, "Dataset path")->required();
  app->add_option("--order", *order, "Record order")->capture_default_str()
      ->check(CLI::IsMember({"sequential", "random"}));
  app->add_option("--threads", o->threads, "Reading threads")->capture_default_str()->check(CLI::Range(1, 1024));
  app->add_option("--repeat", o->repeat, "Rounds; figures are medians")->capture_default_str()->check(CLI::Range(1, 1000));
  app->add_option("--seed", o->seed, "Seed of the random order")->capture_default_str();
  app->add_flag("--json", *json, "Print one JSON object as the last stdout line");
  commands->push_back({app, [=] {
    o->random_order = *order == "random";
    auto result = BenchStorage(*o);
    if (!result.ok()) return ReportError("bench storage", result.status());
    return PrintResult(*json, *result, BenchStorageText);
  }});

  auto* sapp = bench->add_subcommand("sampler", "One epoch's permutation plus one rank's share, vs PyTorch");
  sapp->footer("Defaults: ImageNet-1k (1,281,167 samples), 64 ranks. PyTorch is timed in the same run\n"
               "when a python3 with torch is found (Debian: python3-torch).");
  auto so = std::make_shared<BenchSamplerOptions>();
  auto sjson = std::make_shared<bool>(false);
  auto no_torch = std::make_shared<bool>(false);
  auto perm = std::make_shared<std::string>("torch");
  sapp->add_option("--size", so->size, "Dataset size")->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, sampler::kMaxSamples));
  sapp->add_option("--world", so->world, "World size")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  sapp->add_option("--rank", so->rank, "Rank whose share is computed")->capture_default_str();
  sapp->add_option("--repeat", so->repeat, "Epochs timed; figures are medians")->capture_default_str()
      ->check(CLI::Range(1, 10000));
  sapp->add_option("--permutation", *perm, "torch, torch-legacy or feistel")->capture_default_str()
      ->check(CLI::IsMember({"torch", "torch-legacy", "feistel"}));
  sapp->add_flag("--no-torch", *no_torch, "Do not time PyTorch");
  sapp->add_flag("--json", *sjson, "Print one JSON object as the last stdout line");
  commands->push_back({sapp, [=] {
    so->compare_torch = !*no_torch;
    so->permutation = *sampler::ParsePermutationKind(*perm);
    auto result = BenchSampler(*so);
    if (!result.ok()) return ReportError("bench sampler", result.status());
    return PrintResult(*sjson, *result, BenchSamplerText);
  }});

  auto* lapp = bench->add_subcommand("loader", "Loader images/s next to the full-decode ceiling");
  lapp->footer("Example: ddpio bench loader --data /data/train.lmdb --workers 2 --batch-size 64");
  auto lo = std::make_shared<BenchLoaderOptions>();
  auto ljson = std::make_shared<bool>(false);
  auto decode = std::make_shared<std::string>("fast");
  auto output = std::make_shared<std::string>("uint8");
  auto crop = std::make_shared<std::string>("0.08,1");
  auto no_flip = std::make_shared<bool>(false);
  auto eval = std::make_shared<bool>(false);
  lapp->add_option("--data", lo->data, "Dataset path")->required();
  lapp->add_option("--workers", lo->loader.workers, "Worker threads (0: all cores)")->capture_default_str()
      ->check(CLI::Range(0, 1024));
  lapp->add_option("--batch-size", lo->loader.batch_size, "Batch size")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  lapp->add_option("--prefetch", lo->loader.prefetch, "Batches prefetched")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  lapp->add_option("--image-size", lo->loader.augment.size, "Output side in pixels")->capture_default_str()
      ->check(CLI::Range(1, 8192));
  lapp->add_option("--crop-scale", *crop, "RandomResizedCrop scale range MIN,MAX")->capture_default_str();
  lapp->add_flag("--no-flip", *no_flip, "No random horizontal flip");
  lapp->add_flag("--eval", *eval, "Evaluation geometry (resize shorter side + center crop)");
  lapp->add_option("--decode", *decode, "fast (region + DCT scaling) or exact (full decode)")
      ->capture_default_str()->check(CLI::IsMember({"fast", "exact"}));
  lapp->add_option("--output", *output, "uint8 (NHWC) or float (normalised NCHW)")
      ->capture_default_str()->check(CLI::IsMember({"uint8", "float"}));
  lapp->add_option("--epochs", lo->epochs, "Epochs; figures are medians")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  lapp->add_flag("--json", *ljson, "Print one JSON object as the last stdout line");
  commands->push_back({lapp, [=] {
    if (!ParseScaleRange(*crop, &lo->loader.augment.scale_min, &lo->loader.augment.scale_max)) {
      return ReportUsageError("bench loader", "--crop-scale takes MIN,MAX with 0 < MIN <= MAX <= 1");
    }
    lo->loader.augment.flip_probability = *no_flip ? 0.0 : 0.5;
    lo->loader.augment.train = !*eval;
    lo->loader.decode = *loader::ParseDecodeMode(*decode);
    lo->loader.output = *output == "float" ? loader::OutputFormat::kFloatNchw : loader::OutputFormat::kUint8Nhwc;
    auto result = BenchLoader(*lo);
    if (!result.ok()) return ReportError("bench loader", result.status());
    return PrintResult(*ljson, *result, BenchLoaderText);
  }});

  auto* capp = bench->add_subcommand("comm", "Collective bandwidth and latency vs plain TCP (run under ddpio launch)");
  capp->footer("Example: ddpio launch --nproc-per-node 4 -- ddpio bench comm --size 67108864 --group-size 2\n"
               "Rank 0 prints the result; the ceiling is plain TCP between ranks 0 and 1 in the same run.");
  auto co = std::make_shared<BenchCommOptions>();
  auto cjson = std::make_shared<bool>(false);
  capp->add_option("--backend", co->backend,
                   "gloo (CPU, TCP), nccl (needs a CUDA device), or auto: nccl when a device is usable, else gloo")->capture_default_str()
      ->check(CLI::IsMember({"gloo", "nccl", "auto"}));
  capp->add_option("--size", co->size, "Bytes per operation")->capture_default_str()->check(CLI::Range(uint64_t{4}, uint64_t{1} << 30));
  capp->add_option("--repeat", co->repeat, "Repetitions; figures are medians")->capture_default_str()->check(CLI::Range(1, 1000));
  capp->add_option("--group-size", co->group_size, "Run within groups of this size (default: the world)")
      ->check(CLI::Range(1, 1 << 20));
  capp->add_option("--layout", co->layout, "Group layout")->capture_default_str()
      ->check(CLI::IsMember({"contiguous", "strided"}));
  AddRendezvousFlags(capp, &co->store, &co->advertise_addr);
  capp->add_flag("--json", *cjson, "Rank 0 prints one JSON object as its last stdout line");
  commands->push_back({capp, [=] {
    auto result = BenchComm(*co);
    if (!result.ok()) return ReportError("bench comm", result.status());
    if (result->empty()) return kExitOk;
    return PrintResult(*cjson, *result, BenchCommText);
  }});

  auto* fapp = bench->add_subcommand("feed", "Group feeding: leaders read, peers receive (run under ddpio launch)");
  fapp->footer(
      "Every rank prints its own result line. Compare --group-size 1 (every rank reads for itself)\n"
      "with 2, 4, ... on the same ranks. Example:\n"
      "  ddpio launch --nproc-per-node 4 -- ddpio bench feed --data /data/train.lmdb --group-size 2 --json\n"
      "shard: each rank gets the DistributedSampler's indices for itself; replicate: every member of a\n"
      "group gets the group's batches. encoded: the leader sends stored records, each rank decodes its\n"
      "own; decoded: the leader decodes and augments for the group and sends ready batches.");
  auto fo = std::make_shared<BenchFeedOptions>();
  fo->feeder.loader.batch_size = 64;
  auto fjson = std::make_shared<bool>(false);
  auto timeout_s = std::make_shared<int>(120);
  fapp->add_option("--data", fo->data, "Dataset path (opened by group leaders only)")->required();
  fapp->add_option("--group-size", fo->group_size, "Ranks per group; its leader reads for all of them")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  fapp->add_option("--layout", fo->layout, "Group layout")->capture_default_str()
      ->check(CLI::IsMember({"contiguous", "strided"}));
  AddFeederFlags(fapp, &fo->feeder);
  fapp->add_option("--epochs", fo->epochs, "Epochs fed")->capture_default_str()->check(CLI::Range(1, 100000));
  fapp->add_option("--indices-out", fo->indices_out, "Write the indices each rank received to PREFIX.rank<r>.txt");
  fapp->add_option("--batch-size", fo->feeder.loader.batch_size, "Batch size")->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  fapp->add_option("--image-size", fo->feeder.loader.augment.size, "Output side in pixels")->capture_default_str()
      ->check(CLI::Range(1, 8192));
  fapp->add_option("--workers", fo->feeder.loader.workers, "Decoding threads per loader (0: all cores)")
      ->capture_default_str()->check(CLI::Range(0, 1024));
  fapp->add_option("--depth", fo->feeder.depth, "Messages a leader may run ahead of each member")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  fapp->add_option("--seed", fo->feeder.sampler.seed, "Sampler seed")->capture_default_str();
  fapp->add_option("--timeout", *timeout_s, "Seconds any one send or receive may take")->capture_default_str()
      ->check(CLI::Range(1, 86400));
  AddRendezvousFlags(fapp, &fo->store, &fo->advertise_addr);
  fapp->add_flag("--json", *fjson, "Print one JSON object per rank as its last stdout line");
  commands->push_back({fapp, [=] {
    fo->feeder.timeout = std::chrono::seconds(*timeout_s);
    auto result = BenchFeed(*fo);
    if (!result.ok()) return ReportError("bench feed", result.status());
    return PrintResult(*fjson, *result, BenchFeedText);
  }});
}

}  // namespace ddpio::tools
