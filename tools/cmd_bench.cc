// CLI glue for `ddpio bench ...`.
#include <iostream>
#include <memory>

#include "tools/bench_storage.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/sampler_cli.h"

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
  sapp->add_option("--size", so->size, "Dataset size")->capture_default_str();
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
}

}  // namespace ddpio::tools
