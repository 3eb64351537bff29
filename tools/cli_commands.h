// The `ddpio` subcommands register themselves on the CLI11 app with AddXxxCommands; main()
// parses, then runs the one command whose app was parsed. Each run returns the exit code:
// 0 success, 1 runtime error, 2 usage error.
#ifndef DDPIO_TOOLS_CLI_COMMANDS_H_
#define DDPIO_TOOLS_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ddpio::tools {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

void AddDataCommands(CLI::App& root, std::vector<Command>* commands);    // synth, convert, inspect
void AddSamplerCommand(CLI::App& root, std::vector<Command>* commands);  // sampler
void AddBenchCommands(CLI::App& root, std::vector<Command>* commands);   // bench storage|sampler
void AddLaunchCommand(CLI::App& root, std::vector<Command>* commands);   // launch
void AddTrainCommand(CLI::App& root, std::vector<Command>* commands);    // train
void AddCheckpointCommand(CLI::App& root, std::vector<Command>* commands);  // checkpoint
void AddInfoCommand(CLI::App& root, std::vector<Command>* commands);        // info
void AddUploadCommand(CLI::App& root, std::vector<Command>* commands);      // upload

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_CLI_COMMANDS_H_
