// CLI glue for `ddpio train`.
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "ddpio/comm/backend.h"
#include "tools/cli_commands.h"
#include "tools/cli_flags.h"
#include "tools/cli_util.h"
#include "tools/train.h"

namespace ddpio::tools {
namespace {

bool ParseWidths(const std::string& text, std::vector<int>* widths) {
  widths->clear();
  if (text.empty() || text == "none") return true;  // no hidden layer: a linear classifier
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int w = 0;
    if (!absl::SimpleAtoi(part, &w) || w < 1 || w > (1 << 20)) return false;
    widths->push_back(w);
  }
  return true;
}

// The flags' raw values that the command turns into TrainOptions when it runs.
struct TrainFlags {
  TrainCliOptions options;
  bool json = false;
  std::string hidden = "256,128";
  int bucket_kb = 1024;
  uint64_t seed = 0;
};

void AddDataFlags(CLI::App* app, TrainFlags* f) {
  trainer::TrainOptions& t = f->options.train;
  app->add_option("--data", t.pipeline.data, "Training dataset (opened by group leaders only)")
      ->required();
  app->add_option("--val", t.val, "Validation dataset, evaluated after every epoch");
  AddCacheFlags(app, &t.pipeline);
  app->add_option("--epochs", t.epochs, "Epochs")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  AddLoaderFlags(app, &t.pipeline);
  AddSettingFlags(app, &t.pipeline, {"seq_len"});
  AddOrderFlags(app, &t.pipeline);
  app->add_option("--seed", f->seed, "Seed of the sampler, augmentation and initial parameters")
      ->capture_default_str();
  AddFeederFlags(app, &t.pipeline);
}

void AddModelFlags(CLI::App* app, TrainFlags* f) {
  trainer::TrainOptions& t = f->options.train;
  app->add_option("--hidden", f->hidden, "Hidden layer widths, e.g. 256,128 ('none': linear)")
      ->capture_default_str();
  app->add_option("--context", t.context,
                  "Token datasets (--seq-len): ids the next-token model sees before each "
                  "prediction (an embedding of each, concatenated)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app->add_option("--accumulate", t.accumulate,
                  "Micro-batches per optimizer step (no all-reduce on the others)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_option("--lr", t.lr, "Peak learning rate")
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 1e3));
  app->add_option("--momentum", t.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--weight-decay", t.weight_decay, "L2 weight decay")
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--warmup-steps", t.warmup_steps, "Linear warm-up steps")->capture_default_str();
  AddEnumOption(app, "--schedule", &t.decay, trainer::ParseDecay, trainer::DecayName,
                "After warm-up: cosine (to 0 at the end) or step");
  app->add_option("--step-size", t.step_size, "step schedule: x0.1 every this many steps")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app->add_option("--bucket-kb", f->bucket_kb, "Gradient all-reduce bucket size in KiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  AddEnumOption(app, "--matmul", &t.matmul, trainer::ParseMatMulEngine, trainer::MatMulEngineName,
                "With --device cpu: cpu (OpenBLAS), cuda (cuBLAS, operands staged per product) or "
                "auto: cuda when a "
                "device is usable");
  app->add_option("--device", f->options.device,
                  "cpu (default): the model in host memory, gradients all-reduced over Gloo; cuda: "
                  "the model "
                  "resident on each rank's GPU (LOCAL_RANK modulo the devices), gradients "
                  "all-reduced over NCCL on "
                  "the device, and with --payload decoded the batches arrive device to device. "
                  "Without a usable "
                  "GPU every rank fails at once")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app->add_option("--backend", f->options.backend,
                  "Instead of --device: gloo (= --device cpu), nccl (= --device cuda) or auto: "
                  "cuda when a GPU is "
                  "usable and this build has the device model, else cpu")
      ->check(ParsedBy(comm::ParseBackend, "gloo|nccl|auto"));
  app->add_option("--blas-threads", t.blas_threads, "OpenBLAS threads per rank")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_option("--compute-ms", t.compute_ms,
                  "Simulated extra compute per step (a heavier model)")
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 1e6));
}

void AddRunFlags(CLI::App* app, TrainFlags* f) {
  trainer::TrainOptions& t = f->options.train;
  app->add_option("--checkpoint-dir", t.checkpoint_dir,
                  "Directory for rank 0's checkpoint (written atomically)");
  app->add_option("--checkpoint-every", t.checkpoint_every,
                  "Also checkpoint every N optimizer steps")
      ->capture_default_str();
  app->add_flag("--resume", t.resume,
                "Continue from the checkpoint in --checkpoint-dir (if there is one)");
  app->add_option("--stop-after-steps", t.stop_after_steps,
                  "Checkpoint and stop after N steps (0: run to the end)")
      ->capture_default_str();
  app->add_option("--progress-every", t.progress_every,
                  "Rank 0 logs progress every N steps (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app->add_option("--report-every", t.report_every,
                  "Gather the straggler report (each rank's step time per stage: waiting for "
                  "batches, compute, all-reduce, storage read, decode, relay; the slowest rank "
                  "and its bottleneck) every N optimizer steps; rank 0 logs it (0: only at each "
                  "epoch's end, where it is always gathered)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app->add_option("--metrics-file", t.metrics_file,
                  "Rank 0 writes each straggler report here in Prometheus' text format, "
                  "replaced atomically (node_exporter's textfile collector: *.prom)");
  app->add_option("--indices-out", t.indices_out,
                  "Each rank appends the dataset indices of every optimizer step to "
                  "PREFIX.rank<R>.txt, with a line at each start or restart: check a run with "
                  "failures with scripts/tally-indices.py PREFIX (every sample of every epoch "
                  "exactly once; steps redone since the last checkpoint counted)")
      ->type_name("PREFIX");
  AddRendezvousFlags(app, &f->options.store, &f->options.advertise_addr);
  AddJsonFlag(app, &f->json, /*per_rank=*/true);
}

// What the flags cannot check one by one; then the options derived from them.
int RunTrainCommand(TrainFlags& f) {
  trainer::TrainOptions& t = f.options.train;
  if (!ParseWidths(f.hidden, &t.hidden)) {
    return ReportUsageError("train",
                            "--hidden takes positive widths separated by commas, e.g. 256,128");
  }
  // The model lives in host memory three times (parameters, gradients, momentum): bound it
  // before anything is allocated. The last layer (to the classes) is not counted here.
  constexpr uint64_t kMaxParams = uint64_t{1} << 28;
  // (A token model's input width is the vocabulary's: the trainer bounds it once it is known.)
  uint64_t params = 0, in = uint64_t{3} * t.pipeline.image_size * t.pipeline.image_size;
  for (int w : t.pipeline.seq_len > 0 ? std::vector<int>{} : t.hidden) {
    params += (in + 1) * static_cast<uint64_t>(w);
    in = static_cast<uint64_t>(w);
    if (params > kMaxParams) break;
  }
  if (params > kMaxParams) {
    return ReportUsageError(
        "train",
        absl::StrCat("--image-size ", t.pipeline.image_size, " and --hidden ", f.hidden,
                     " make a model of more than ", kMaxParams, " parameters; lower them"));
  }
  if ((t.resume || t.stop_after_steps > 0 || t.checkpoint_every > 0) && t.checkpoint_dir.empty()) {
    return ReportUsageError(
        "train", "--resume, --stop-after-steps and --checkpoint-every need --checkpoint-dir");
  }
  t.bucket_bytes = static_cast<size_t>(f.bucket_kb) * 1024;
  t.pipeline.seed = f.seed;
  t.pipeline.augment_seed = f.seed + 1;
  t.init_seed = f.seed + 2;
  auto result = RunTrain(f.options);
  if (!result.ok()) return ReportError("train", result.status());
  return PrintResult(f.json, *result, TrainText);
}

}  // namespace

void AddTrainCommand(CLI::App& root, std::vector<Command>* commands) {
  auto* app =
      root.add_subcommand("train", "Train the bundled MLP with DDP semantics on ddpio's data path");
  app->footer(
      "Run it under ddpio launch, torchrun, srun or mpirun (alone it is one rank). Example, 4 "
      "ranks in\n"
      "2 groups whose leaders read for their peer, validating after every epoch:\n"
      "  ddpio launch --nproc-per-node 4 -- ddpio train --data train.lmdb --val val.lmdb \\\n"
      "      --epochs 5 --batch-size 32 --group-size 2 --workers 1\n"
      "Gradients are averaged over ranks in --bucket-kb buckets while backward runs; the global "
      "batch\n"
      "is ranks x --batch-size x --accumulate. Validation uses mask padding: every validation "
      "sample\n"
      "is counted exactly once whatever the world size. With --checkpoint-dir, rank 0 writes a\n"
      "checkpoint after every epoch (and every --checkpoint-every steps); --resume continues from "
      "it,\n"
      "also on another world size. Rank 0 logs progress; with --json every rank prints one JSON "
      "line\n"
      "(train_loss, val_accuracy, samples_per_s, stall_fraction, param_checksum, feeder "
      "counters,\n"
      "the last straggler report). At each epoch's end (and every --report-every steps) rank 0 "
      "logs\n"
      "where each rank's step time goes and names the slowest rank and its bottleneck, e.g.\n"
      "  rank 5 (node 2): 38% of its step waiting for batches from leader rank 4; rank 4 (node 2): "
      "storage read p99 61 ms ...");
  auto f = std::make_shared<TrainFlags>();
  f->options.train.pipeline.batch_size = 32;
  f->options.train.pipeline.image_size = 32;
  AddDataFlags(app, f.get());
  AddModelFlags(app, f.get());
  AddRunFlags(app, f.get());
  commands->push_back({app, [f] { return RunTrainCommand(*f); }});
}

}  // namespace ddpio::tools
