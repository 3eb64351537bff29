#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ddpio/device/gpu_libraries.h"
#include "ddpio/device/probe.h"
#include "ddpio/trainer/train_model.h"
#include "tools/cli_commands.h"
#include "tools/cli_flags.h"
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

// One entry per GPU library this build opens on first use, as `ddpio info` prints them.
std::vector<std::string> GpuLibraryLines() {
  const std::string text = device::DescribeGpuLibraries();
  if (text.empty()) return {};
  return absl::StrSplit(text, '\n');
}

}  // namespace

void AddInfoCommand(CLI::App& root, std::vector<Command>* commands) {
  auto* app =
      root.add_subcommand("info", "Print the version, build features and the accelerator path");
  auto json = std::make_shared<bool>(false);
  app->add_flag("--json", *json, "Print one JSON object");
  commands->push_back(
      {app, [json] {
         const device::DeviceInfo& info = device::Probe();
         if (*json) {
           PrintJsonLine({{"version", kVersion},
                          {"cuda_compiled", info.cuda_compiled},
                          {"nccl_compiled", info.nccl_compiled},
                          {"nccl_version", info.nccl_version},
                          {"device_model_compiled", trainer::DeviceModelCompiled()},
                          {"cuda_devices", info.devices},
                          {"path", info.devices > 0 ? "gpu" : "cpu"},
                          {"why", info.why},
                          {"gpu_libraries", GpuLibraryLines()}});
         } else {
           std::cout << "ddpio " << kVersion << "\n"
                     << device::Describe(info) << "\n"
                     << (trainer::DeviceModelCompiled()
                             ? "train --device cuda: compiled (nvcc kernels, cuBLAS)"
                             : "train --device cuda: not compiled (no nvcc or cuBLAS)")
                     << std::endl;
           // What the probe opened, and what is left for first use.
           if (const std::string libs = device::DescribeGpuLibraries(); !libs.empty()) {
             std::cout << libs << std::endl;
           }
         }
         return kExitOk;
       }});
}

}  // namespace ddpio::tools
