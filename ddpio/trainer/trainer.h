// The bundled DDP trainer: an MLP fed by the group feeder, trained the way PyTorch's
// DistributedDataParallel trains: identical initial parameters (broadcast from rank 0),
// gradients averaged over ranks in buckets launched while backward continues, no
// communication on accumulation micro-batches, SGD with momentum and weight decay, a warm-up +
// cosine/step schedule, exact-once evaluation (mask padding), atomic checkpoints and resume
// (also on another world size). See docs/TRAINER.md.
#ifndef DDPIO_TRAINER_TRAINER_H_
#define DDPIO_TRAINER_TRAINER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/pipeline/pipeline.h"
#include "ddpio/trainer/optimizer.h"
#include "ddpio/trainer/step_report.h"

namespace ddpio::trainer {

// Where the model lives. kCpu: in host memory, the world on Gloo. kCuda: resident on this rank's
// CUDA device (DeviceMlp), the world on NCCL (the job must use the NCCL backend).
enum class ModelDevice { kCpu, kCuda };
std::string ModelDeviceName(ModelDevice device);  // "cpu", "cuda"
absl::StatusOr<ModelDevice> ParseModelDevice(std::string_view name);

// The CPU model's matrix products: kCpu (OpenBLAS), kCuda (cuBLAS, operands staged per product;
// an error without a usable device) or kAuto (cuBLAS when a device is usable).
enum class MatMulEngine { kCpu, kCuda, kAuto };
std::string MatMulEngineName(MatMulEngine engine);  // "cpu", "cuda", "auto"
absl::StatusOr<MatMulEngine> ParseMatMulEngine(std::string_view name);

struct TrainOptions {
  // The training data and how it is fed: the dataset, the group, the sampler, the loader (batch
  // size, image size, augmentation) and feeding (mode, payload) settings, and `timeout`, which
  // also bounds every collective of the training. output must be uint8; held_batches is raised
  // to accumulate + 1 (a step's micro-batches are held until its work is done).
  PipelineOptions pipeline;
  std::string val;  // "" = no evaluation
  int epochs = 1;
  std::vector<int> hidden = {256, 128};
  // A token dataset (pipeline.seq_len > 0) trains a next-token model: `context` ids (the id and
  // those before it in the sequence) embedded, the MLP's hidden layers, a vocabulary output. >= 1.
  int context = 2;
  uint64_t init_seed = 0;
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  uint64_t warmup_steps = 0;
  Decay decay = Decay::kCosine;
  uint64_t step_size = 1000;
  int accumulate = 1;             // micro-batches per optimizer step
  size_t bucket_bytes = 1 << 20;  // gradient all-reduce buckets
  double compute_ms = 0;          // simulated extra compute per step (a heavier model)
  std::string checkpoint_dir;     // "" = none
  uint64_t checkpoint_every = 0;  // optimizer steps between checkpoints (0: end of each epoch only)
  bool resume = false;
  uint64_t stop_after_steps = 0;  // stop (after checkpointing) once this many steps ran in this job
  int progress_every = 20;        // rank 0 prints a progress line every N steps (0: never)
  // The straggler report (step_report.h): gathered every N optimizer steps (0: only at each
  // epoch's end, where it is always gathered), printed by rank 0 with the progress lines, and
  // written by rank 0 to `metrics_file` (Prometheus text, replaced atomically; "" = none; a
  // failed write is a warning, the training goes on).
  int report_every = 0;
  std::string metrics_file;
  // Each rank appends the indices of every optimizer step, and a line at each start, to
  // PREFIX.rank<R>.txt ("" = none; index_log.h), for scripts/tally-indices.py.
  std::string indices_out;
  int blas_threads = 1;
  MatMulEngine matmul = MatMulEngine::kAuto;  // with device kCpu only
  ModelDevice device = ModelDevice::kCpu;
};

struct TrainResult {
  uint64_t steps = 0;        // optimizer steps taken in this job
  double train_loss = 0;     // mean loss over the last epoch's (or run's) steps, this rank
  double val_accuracy = -1;  // over every validation sample exactly once; -1 without --val
  // A token model: the unigram entropy of the training labels (nats per token, over the first
  // unigram_labels of them): the loss of the best model that ignores context. -1 for images.
  double unigram_entropy = -1;
  uint64_t unigram_labels = 0;
  uint64_t vocabulary = 0;  // the token model's output classes
  // A token model: the sequences this rank trained on in this job, per source of a mixture
  // (datasets in the order `--data` names them; one entry for one dataset).
  std::vector<uint64_t> sequences_per_source;
  uint64_t val_samples = 0;
  double samples_per_s = 0;   // this rank's training samples / training time
  double stall_fraction = 0;  // time waiting for the next batch / step time
  uint64_t param_checksum = 0;
  std::string path;  // where the model ran, and why (e.g. "cpu: OpenBLAS ... (no cuBLAS: ...)")
  broadcast::FeederCounters feeder;
  // The last straggler report (every rank has it) and how many were gathered.
  std::optional<StepReport> step_report;
  uint64_t step_reports = 0;
  // A training dataset in an object store: what this rank asked of the store
  // (Pipeline::store_counters).
  std::optional<storage::remote::RemoteCounters> store;
  std::vector<float> params;
};

// The pipelines Train opens: training, and validation (shard, no shuffle, mask padding, eval
// geometry: every validation sample exactly once).
PipelineOptions TrainPipelineOptions(const TrainOptions& options);
PipelineOptions ValidationPipelineOptions(const TrainOptions& options);

// Trains on `job`'s world. Every rank calls it with the same options.
absl::StatusOr<TrainResult> Train(comm::Job& job, const TrainOptions& options,
                                  const std::function<void(const std::string&)>& progress = {});

}  // namespace ddpio::trainer

#endif  // DDPIO_TRAINER_TRAINER_H_
