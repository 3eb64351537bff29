// CLI glue for `ddpio checkpoint`: what a training checkpoint holds, and how far two are apart
// (docs/GPU.md's first-GPU checklist compares a --device cuda run with a --device cpu one).
#include <cmath>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/trainer/checkpoint.h"
#include "ddpio/trainer/mlp.h"
#include "tools/cli_commands.h"
#include "tools/cli_util.h"

namespace ddpio::tools {
namespace {

struct CheckpointFlags {
  std::string dir, compare;
  double tolerance = 1e-5;
  bool json = false;
};

std::string Describe(const std::string& dir, const trainer::Checkpoint& c) {
  return absl::StrFormat(
      "%s: epoch %d, position %d, step %d; %d parameters, checksum %016x; sampler seed %d, augment "
      "seed %d, "
      "dataset of %d",
      trainer::CheckpointPath(dir), c.epoch, c.position, c.step, c.params.size(),
      trainer::ParamChecksum(c.params), c.sampler_seed, c.augment_seed, c.dataset_size);
}

int Run(const CheckpointFlags& f) {
  absl::StatusOr<trainer::Checkpoint> a = trainer::ReadCheckpoint(f.dir);
  if (!a.ok()) return ReportError("checkpoint", a.status());
  nlohmann::json j = {
      {"checkpoint", trainer::CheckpointPath(f.dir)},
      {"epoch", a->epoch},
      {"position", a->position},
      {"step", a->step},
      {"params", a->params.size()},
      {"param_checksum", absl::StrFormat("%016x", trainer::ParamChecksum(a->params))}};
  if (!f.json) std::cout << Describe(f.dir, *a) << std::endl;
  if (f.compare.empty()) {
    if (f.json) PrintJsonLine(j);
    return kExitOk;
  }
  absl::StatusOr<trainer::Checkpoint> b = trainer::ReadCheckpoint(f.compare);
  if (!b.ok()) return ReportError("checkpoint", b.status());
  absl::StatusOr<trainer::ParamDifference> d = trainer::CompareParams(*a, *b);
  if (!d.ok()) return ReportError("checkpoint", d.status());
  // Parameters of different points of training are not comparable: that is an answer too.
  const bool same_point = a->epoch == b->epoch && a->position == b->position && a->step == b->step;
  const bool within = same_point && d->max_relative <= f.tolerance;
  if (f.json) {
    j["compare"] = trainer::CheckpointPath(f.compare);
    j["same_point"] = same_point;
    j["differing"] = d->differing;
    j["max_abs"] = d->max_abs;  // JSON null when infinite (a NaN or an infinity on one side)
    j["max_relative"] = d->max_relative;
    j["tolerance"] = f.tolerance;
    j["within"] = within;
    PrintJsonLine(j);
  } else {
    std::cout << Describe(f.compare, *b) << "\n";
    if (!same_point) {
      std::cout << absl::StrFormat(
                       "not the same point of training (epoch %d vs %d, position %d vs %d, step %d "
                       "vs %d)",
                       a->epoch, b->epoch, a->position, b->position, a->step, b->step)
                << "\n";
    }
    std::cout << absl::StrFormat(
                     "%d of %d parameters differ%s; max |a - b| %.3g, relative to max |b| %.3g "
                     "(tolerance %.3g): %s",
                     d->differing, d->count, d->differing == 0 ? " (bit for bit the same)" : "",
                     d->max_abs, d->max_relative, f.tolerance, within ? "within" : "BEYOND")
              << std::endl;
  }
  return within ? kExitOk : kExitRuntimeError;
}

}  // namespace

void AddCheckpointCommand(CLI::App& root, std::vector<Command>* commands) {
  auto* app = root.add_subcommand("checkpoint", "Describe a training checkpoint, or compare two");
  app->footer(
      "A checkpoint directory is what `ddpio train --checkpoint-dir DIR` wrote "
      "(DIR/checkpoint.bin,\n"
      "docs/TRAINER.md). With --compare, the exit code says whether the parameters agree: 0 when "
      "the\n"
      "largest difference, relative to the largest parameter of the second, is within --tolerance "
      "and\n"
      "both are at the same epoch, position and step; 1 otherwise. Example, after one step on the\n"
      "GPU and one on the CPU (docs/GPU.md):\n"
      "  ddpio checkpoint /tmp/g/one-cuda --compare /tmp/g/one-cpu");
  auto f = std::make_shared<CheckpointFlags>();
  app->add_option("dir", f->dir, "Checkpoint directory")->required();
  app->add_option("--compare", f->compare,
                  "A second checkpoint directory to compare the parameters with");
  app->add_option("--tolerance", f->tolerance, "Largest relative difference accepted")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app->add_flag("--json", f->json, "Print one JSON object");
  commands->push_back({app, [f] { return Run(*f); }});
}

}  // namespace ddpio::tools
