// CLI glue for `ddpio bench ...`.
#include <iostream>
#include <memory>

#include "tools/bench_storage.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

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
    if (*json) {
      PrintJsonLine(*result);
    } else {
      std::cout << BenchStorageText(*result);
    }
    return kExitOk;
  }});
}

}  // namespace ddpio::tools
