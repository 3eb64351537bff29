// The bundled DDP trainer: an MLP fed by the group feeder, trained the way PyTorch's
// DistributedDataParallel trains: identical initial parameters (broadcast from rank 0),
// gradients averaged over ranks in buckets launched while backward continues, no
// communication on accumulation micro-batches, SGD with momentum and weight decay, a warm-up +
// cosine/step schedule, exact-once evaluation (mask padding), atomic checkpoints and resume
// (also on another world size). See docs/TRAINER.md.
#ifndef DDPIO_TRAINER_TRAINER_H_
#define DDPIO_TRAINER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/group_feeder.h"
#include "ddpio/pipeline/pipeline.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/trainer/optimizer.h"

namespace ddpio::trainer {

struct TrainOptions {
  std::string data;
  std::string val;  // "" = no evaluation
  int epochs = 1;
  // Sampler, loader (batch size, image size, augmentation) and feeding (mode, payload) settings.
  broadcast::FeederOptions feeder;
  int group_size = 1;
  std::string layout = "contiguous";
  std::vector<int> hidden = {256, 128};
  uint64_t init_seed = 0;
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  uint64_t warmup_steps = 0;
  Decay decay = Decay::kCosine;
  uint64_t step_size = 1000;
  int accumulate = 1;            // micro-batches per optimizer step
  size_t bucket_bytes = 1 << 20; // gradient all-reduce buckets
  double compute_ms = 0;         // simulated extra compute per step (a heavier model)
  std::string checkpoint_dir;    // "" = none
  uint64_t checkpoint_every = 0; // optimizer steps between checkpoints (0: end of each epoch only)
  bool resume = false;
  uint64_t stop_after_steps = 0; // stop (after checkpointing) once this many steps ran in this job
  int progress_every = 20;       // rank 0 prints a progress line every N steps (0: never)
  int blas_threads = 1;
  std::string matmul = "auto";   // cpu (OpenBLAS), cuda (cuBLAS; error without a device), auto
  // cpu: the model in host memory, the world on Gloo. cuda: the model resident on this rank's
  // CUDA device (DeviceMlp), the world on NCCL (the job must use the NCCL backend); --matmul is
  // then not used.
  std::string device = "cpu";
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

struct TrainResult {
  uint64_t steps = 0;           // optimizer steps taken in this job
  double train_loss = 0;        // mean loss over the last epoch's (or run's) steps, this rank
  double val_accuracy = -1;     // over every validation sample exactly once; -1 without --val
  uint64_t val_samples = 0;
  double samples_per_s = 0;     // this rank's training samples / training time
  double stall_fraction = 0;    // time waiting for the next batch / step time
  uint64_t param_checksum = 0;
  std::string path;             // where the model ran, and why (e.g. "cpu: OpenBLAS ... (no cuBLAS: ...)")
  broadcast::FeederCounters feeder;
  std::vector<float> params;
};

// The pipelines Train opens: training, and validation (shard, no shuffle, mask padding, eval
// geometry: every validation sample exactly once). InvalidArgument for an unknown layout.
absl::StatusOr<PipelineOptions> TrainPipelineOptions(const TrainOptions& options);
absl::StatusOr<PipelineOptions> ValidationPipelineOptions(const TrainOptions& options);

// Trains on `job`'s world. Every rank calls it with the same options.
absl::StatusOr<TrainResult> Train(comm::Job& job, const TrainOptions& options,
                                  const std::function<void(const std::string&)>& progress = {});

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_TRAINER_H_
