// `ddpio`: one program, many subcommands. See `ddpio --help`.
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <new>

#include "tools/cli_commands.h"
#include "tools/cli_util.h"

int main(int argc, char** argv) {
  using namespace ddpio::tools;
  CLI::App app(
      "ddpio: data loading and IO for multi-node data-parallel training.\n"
      "Typical flow: synth (or your own ImageFolder) -> convert -> inspect --verify -> train "
      "(under launch).");
  app.require_subcommand(0, 1);
  app.footer(
      "Every subcommand has --help. Exit codes: 0 success, 1 runtime error, 2 usage error.\n"
      "Where a command reports results, --json prints one JSON object as the last stdout line.");
  bool version = false;
  app.add_flag("--version", version, "Print the version and the accelerator path, then exit");
  std::vector<Command> commands;
  AddDataCommands(app, &commands);
  AddSamplerCommand(app, &commands);
  AddBenchCommands(app, &commands);
  AddTrainCommand(app, &commands);
  AddCheckpointCommand(app, &commands);
  AddLaunchCommand(app, &commands);
  AddInfoCommand(app, &commands);
  AddUploadCommand(app, &commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsageError;
  }
  if (version) {
    for (auto& c : commands) {
      if (c.app->get_name() == "info") return c.run();
    }
  }
  for (auto& c : commands) {
    if (!c.app->parsed() || !c.app->get_subcommands().empty()) continue;
    // Last resort: an exception no code path expected (std::bad_alloc for an absurd size, a
    // library's throw) is reported and exits 1 — never an abort with a core dump.
    try {
      return c.run();
    } catch (const std::bad_alloc&) {
      std::fprintf(
          stderr,
          "ddpio %s: error: out of memory (an argument asks for more than this machine has?)\n",
          c.app->get_name().c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddpio %s: internal error: %s\n", c.app->get_name().c_str(), e.what());
    }
    return kExitRuntimeError;
  }
  // A group (e.g. `ddpio bench`) or nothing was named: show the relevant help.
  const CLI::App* shown = &app;
  for (const auto* sub : app.get_subcommands()) shown = sub;
  std::cerr << shown->help();
  return kExitUsageError;
}
