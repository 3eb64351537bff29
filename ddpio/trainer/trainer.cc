#include "ddpio/trainer/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/device/probe.h"
#include "ddpio/pipeline/pipeline.h"
#include "ddpio/trainer/blas.h"
#include "ddpio/trainer/checkpoint.h"
#include "ddpio/trainer/grad_reducer.h"
#include "ddpio/trainer/index_log.h"
#include "ddpio/trainer/mlp.h"
#include "ddpio/trainer/token_stats.h"
#include "ddpio/trainer/train_model.h"

namespace ddpio::trainer {
namespace {

using Clock = std::chrono::steady_clock;

constexpr EnumName<ModelDevice> kDevices[] = {{ModelDevice::kCpu, "cpu"},
                                              {ModelDevice::kCuda, "cuda"}};
constexpr EnumName<MatMulEngine> kEngines[] = {
    {MatMulEngine::kCpu, "cpu"}, {MatMulEngine::kCuda, "cuda"}, {MatMulEngine::kAuto, "auto"}};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Accuracy over every validation sample exactly once: mask padding, sums all-reduced in the
// world communicator's memory (the device's over NCCL).
absl::StatusOr<std::pair<double, uint64_t>> Evaluate(Pipeline& val, TrainModel& model,
                                                     comm::Communicator& world,
                                                     std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(val.StartEpoch(0));
  std::vector<int> predicted;
  float sums[2] = {0, 0};  // correct, counted: exact in float up to 2^24 samples
  for (;;) {
    absl::StatusOr<loader::Batch> b = val.Next();
    if (absl::IsOutOfRange(b.status())) break;
    DDPIO_RETURN_IF_ERROR(b.status());
    DDPIO_RETURN_IF_ERROR(model.Predict(*b, &predicted));
    for (uint64_t k = 0; k < b->size; ++k) {
      if (!b->valid[k]) continue;
      sums[1] += 1;
      if (predicted[k] == b->labels[k]) sums[0] += 1;
    }
  }
  DDPIO_RETURN_IF_ERROR(comm::AllReduceHost(world, sums, 2, comm::ReduceOp::kSum, timeout));
  return std::make_pair(sums[1] > 0 ? static_cast<double>(sums[0]) / sums[1] : 0.0,
                        static_cast<uint64_t>(sums[1]));
}

}  // namespace

std::string ModelDeviceName(ModelDevice device) { return NameOf(kDevices, device); }
absl::StatusOr<ModelDevice> ParseModelDevice(std::string_view name) {
  return ParseName(kDevices, name, "device");
}
std::string MatMulEngineName(MatMulEngine engine) { return NameOf(kEngines, engine); }
absl::StatusOr<MatMulEngine> ParseMatMulEngine(std::string_view name) {
  return ParseName(kEngines, name, "matmul engine");
}

PipelineOptions TrainPipelineOptions(const TrainOptions& o) {
  PipelineOptions p = o.pipeline;
  // A step's micro-batches are held until its work is done (a device reads them asynchronously).
  p.held_batches = std::max(p.held_batches, o.accumulate + 1);
  return p;
}

PipelineOptions ValidationPipelineOptions(const TrainOptions& o) {
  PipelineOptions p = TrainPipelineOptions(o);
  p.data = o.val;
  p.mode = broadcast::FeedMode::kShard;
  p.shuffle = false;
  p.padding = sampler::Padding::kMask;  // every sample once, padding flagged
  p.train = false;
  p.drop_last = false;
  return p;
}

namespace {

// The labels a token model's unigram entropy is counted over (when the dataset records its
// vocabulary; else every sequence is read for the largest id): 16 Mi ids, a few seconds' read.
inline constexpr uint64_t kUnigramLabels = uint64_t{1} << 24;
// A sample's label names its source in a mixture: at most this many (a label beyond is damage).
inline constexpr uint64_t kMaxTokenSources = 1 << 16;

// One job's training, step by step: Open (pipelines, model, identical initial parameters),
// Resume (from a checkpoint), then RunEpoch for each epoch, Validate after it, and Result.
class TrainingRun {
 public:
  static absl::StatusOr<std::unique_ptr<TrainingRun>> Open(
      comm::Job& job, const TrainOptions& o,
      const std::function<void(const std::string&)>& progress);
  // From the checkpoint when asked to resume (ResumeFromCheckpoint); then the index log starts.
  absl::Status Resume();
  // Trains the epochs left; stops early (after checkpointing) at o.stop_after_steps.
  absl::Status Run();
  absl::StatusOr<TrainResult> Result();

 private:
  TrainingRun(comm::Job& job, const TrainOptions& o,
              const std::function<void(const std::string&)>& progress)
      : o_(o),
        world_(job.world()),
        rank_(job.info().rank),
        progress_(progress),
        node_(job.info().rank / std::max(1, job.info().local_world_size)) {}
  absl::Status OpenModel(comm::Job& job);
  // A token model's vocabulary and the unigram entropy of its labels (collective on the world).
  absl::Status CountTokens();
  absl::Status ResumeFromCheckpoint();
  // Trains one epoch from this epoch's position; *stopped when o.stop_after_steps was reached.
  absl::Status RunEpoch(bool* stopped);
  absl::Status CheckLabels(const loader::Batch& b) const;
  // Forward and backward on one micro-batch; on the step's last one, all-reduces the gradients
  // and takes the optimizer step.
  absl::Status MicroBatch(const loader::Batch& b, double scale, bool last_micro);
  absl::Status Save(uint64_t epoch, uint64_t position);
  absl::Status Validate();
  void ReportProgress(uint64_t n, uint64_t batches);
  // Gathers the straggler report of the steps since the last one (collective on the world).
  absl::Status ReportSteps();

  const TrainOptions& o_;
  comm::Communicator& world_;
  const int rank_;
  const std::function<void(const std::string&)>& progress_;
  const int node_;
  std::unique_ptr<StepProfiler> profiler_;
  std::unique_ptr<IndexLog> index_log_;  // null without o.indices_out
  uint64_t report_first_step_ = 0;
  double step_wait_s_ = 0, step_busy_s_ = 0, step_allreduce_s_ = 0;  // the step being taken
  // Destroyed in reverse: the reducer's thread first (an all-reduce in flight ends or times out);
  // then the pipelines, whose feeders stop (a peer's posted NCCL receive ends or is aborted) before
  // the model frees device memory — cudaFree waits for the whole device, which a receive from a
  // dead leader would hold until the feeder's timeout, or for ever were the feeder's own polling
  // stuck behind that cudaFree; then the model, which waits for its stream; and last this step's
  // micro-batches, kept until the model has read them, so a failed step never hands back a buffer
  // the device still reads (a hold outlives its pipeline: loader.h's HeldBatch).
  std::vector<std::shared_ptr<void>> holds_;
  std::unique_ptr<TrainModel> model_;
  std::unique_ptr<Pipeline> train_, val_;
  uint64_t classes_ = 0;
  std::unique_ptr<GradReducer> reducer_;
  Schedule schedule_;
  uint64_t epoch_ = 0, position_ = 0, step_ = 0;
  TrainResult result_;
  double wait_s_ = 0, busy_s_ = 0, loss_sum_ = 0, step_loss_ = 0;
  uint64_t samples_ = 0, loss_steps_ = 0;
};

absl::StatusOr<std::unique_ptr<TrainingRun>> TrainingRun::Open(
    comm::Job& job, const TrainOptions& o,
    const std::function<void(const std::string&)>& progress) {
  if (o.accumulate < 1 || o.epochs < 1 || o.pipeline.output != loader::OutputFormat::kUint8Nhwc) {
    return absl::InvalidArgumentError(
        "accumulate and epochs must be positive; the trainer takes uint8 batches");
  }
  const bool nccl = job.backend().kind == comm::BackendKind::kNccl;
  if ((o.device == ModelDevice::kCuda) != nccl) {
    return WithSetting(
        absl::InvalidArgumentError(
            o.device == ModelDevice::kCuda
                ? "a model on the device (TrainOptions::device cuda) trains with the NCCL backend "
                  "(the job uses gloo)"
                : "the NCCL backend needs the model on the device (TrainOptions::device cuda)"),
        "device");
  }
  if (o.pipeline.seq_len > 0) {
    if (!o.val.empty()) {
      return WithSetting(absl::InvalidArgumentError(
                             "validation (--val) measures a classifier's accuracy; the token "
                             "model's measure is its training loss against the unigram entropy"),
                         "val");
    }
    if (o.device == ModelDevice::kCuda) {
      return WithSetting(
          absl::InvalidArgumentError("the token model trains on the CPU (device cpu, gloo)"),
          "device");
    }
    if (o.context < 1) {
      return WithSetting(absl::InvalidArgumentError(absl::StrCat(
                             "context must be at least 1 (ids per prediction), got ", o.context)),
                         "context");
    }
  }
  if (o.report_every < 0) {
    return WithSetting(
        absl::InvalidArgumentError(absl::StrCat(
            "report_every must be at least 0 (0: at each epoch's end), got ", o.report_every)),
        "report_every");
  }
  auto run = std::unique_ptr<TrainingRun>(new TrainingRun(job, o, progress));
  PipelineOptions train_options = TrainPipelineOptions(o);
  // A block order resumed keeps the lanes its checkpoint's epoch was dealt to, whatever the world
  // size now (its position counts in that order); ResumeFromCheckpoint checks the rest.
  if (o.resume && !o.checkpoint_dir.empty() && o.pipeline.order == sampler::Order::kBlock &&
      o.pipeline.block_lanes == 0) {
    absl::StatusOr<Checkpoint> c = ReadCheckpoint(o.checkpoint_dir, 0);
    if (c.ok() && c->order == sampler::Order::kBlock) train_options.block_lanes = c->block_lanes;
  }
  DDPIO_ASSIGN_OR_RETURN(run->train_, Pipeline::Open(job, train_options));
  {
    const comm::GroupLayout& layout = run->train_->layout();
    const int rank = job.info().rank;
    const bool reads = layout.is_leader(rank) || o.pipeline.readers == broadcast::FeedReaders::kAll;
    run->profiler_ =
        std::make_unique<StepProfiler>(rank, run->node_, reads ? -1 : layout.leader(rank));
  }
  if (!o.val.empty()) {
    DDPIO_ASSIGN_OR_RETURN(run->val_, Pipeline::Open(job, ValidationPipelineOptions(o)));
  }
  DDPIO_RETURN_IF_ERROR(run->OpenModel(job));
  TrainModel* model = run->model_.get();
  // Identical initial parameters everywhere: rank 0's.
  DDPIO_RETURN_IF_ERROR(run->world_.Broadcast(model->params(), model->num_params() * sizeof(float),
                                              0, o.pipeline.timeout));
  std::function<void*(int)> events;
  if (nccl) events = [model](int layer) { return model->layer_event(layer); };
  run->reducer_ =
      std::make_unique<GradReducer>(&run->world_, model->grads(), model->layers(), o.bucket_bytes,
                                    o.pipeline.timeout, std::move(events));
  DDPIO_ASSIGN_OR_RETURN(uint64_t batches_per_epoch, run->train_->BatchesInEpoch(0));
  run->schedule_ = Schedule{o.lr, o.warmup_steps, 0, o.decay, o.step_size, 0.1};
  run->schedule_.total_steps =
      static_cast<uint64_t>(o.epochs) * ((batches_per_epoch + o.accumulate - 1) / o.accumulate);
  return run;
}

absl::Status TrainingRun::CountTokens() {
  // Rank 0 (a leader: it has the dataset) counts; the vocabulary is the dataset's, else the
  // largest id + 1 over every sequence.
  struct {
    uint64_t vocabulary = 0, labels = 0;
    double entropy = 0;
    int32_t code = 0;  // a failed count's status code on rank 0
  } shared;
  std::string error;
  if (rank_ == 0) {
    const storage::DatasetReader& data = *train_->dataset();
    shared.vocabulary = data.header().tokens.vocab_size;
    if (shared.vocabulary == 0) {
      DDPIO_LOG(INFO) << data.path()
                      << " records no vocabulary size: reading every sequence for its largest id "
                         "(the other ranks wait for it up to --timeout)";
    }
    absl::StatusOr<TokenStats> stats =
        CountTokenLabels(data, shared.vocabulary == 0 ? 0 : kUnigramLabels,
                         o_.pipeline.bad_samples == loader::BadSamplePolicy::kSkip);
    if (stats.ok()) {
      if (shared.vocabulary == 0) shared.vocabulary = uint64_t{stats->max_id} + 1;
      shared.labels = stats->labels;
      shared.entropy = stats->unigram_entropy;
    } else {
      shared.code = static_cast<int32_t>(stats.status().code());
      error = std::string(stats.status().message());
    }
  }
  DDPIO_RETURN_IF_ERROR(
      comm::BroadcastHost(world_, &shared, sizeof(shared), 0, o_.pipeline.timeout));
  if (shared.code != 0) {
    return absl::Status(static_cast<absl::StatusCode>(shared.code),
                        rank_ == 0 ? error : "rank 0 could not count the training tokens");
  }
  if (shared.labels == 0) {  // no sequence: nothing to train on
    return WithSetting(
        absl::InvalidArgumentError(absl::StrCat(o_.pipeline.data, " holds no sequence of ",
                                                o_.pipeline.seq_len + 1, " ids")),
        "seq_len");
  }
  // The model lives in host memory three times (parameters, gradients, momentum), its
  // activations once per row of a batch (batch_size x seq_len rows): bound both before anything
  // is allocated, in floating point so that no product wraps.
  constexpr double kMaxParams = double(uint64_t{1} << 28), kMaxActivations = kMaxParams;
  double params = 0, in = static_cast<double>(shared.vocabulary) * o_.context, widest = 0;
  std::vector<int> widths = o_.hidden;
  widths.push_back(0);  // the output layer, to the vocabulary
  for (int w : widths) {
    const double out = w > 0 ? w : static_cast<double>(shared.vocabulary);
    params += (in + 1) * out;
    widest = std::max(widest, out);
    in = out;
  }
  const double rows = static_cast<double>(o_.pipeline.batch_size) * o_.pipeline.seq_len;
  if (shared.vocabulary > (uint64_t{1} << 30) || params > kMaxParams) {
    return WithSetting(
        WithSetting(absl::InvalidArgumentError(absl::StrFormat(
                        "a vocabulary of %d ids, context %d and hidden widths %s make a model of "
                        "%.3g parameters, more than 2^28; lower the context or the widths",
                        shared.vocabulary, o_.context, absl::StrJoin(o_.hidden, ","), params)),
                    "context"),
        "hidden");
  }
  if (rows * widest > kMaxActivations) {
    return WithSetting(
        WithSetting(absl::InvalidArgumentError(absl::StrFormat(
                        "batches of %d sequences of %d ids make %.0f rows of up to %.0f values "
                        "(the vocabulary's): more than 2^28; lower the batch size or seq_len",
                        o_.pipeline.batch_size, o_.pipeline.seq_len, rows, widest)),
                    "batch_size"),
        "seq_len");
  }
  classes_ = shared.vocabulary;
  result_.vocabulary = shared.vocabulary;
  result_.unigram_entropy = shared.entropy;
  result_.unigram_labels = shared.labels;
  if (rank_ == 0 && progress_) {
    progress_(absl::StrFormat(
        "token model: vocabulary %d, context %d; unigram entropy of the labels %.4f nats/token "
        "(over %d tokens): the loss to beat",
        shared.vocabulary, o_.context, shared.entropy, shared.labels));
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::OpenModel(comm::Job& job) {
  ModelOptions mo;
  const bool tokens = o_.pipeline.seq_len > 0;
  if (tokens) {
    DDPIO_RETURN_IF_ERROR(CountTokens());
    mo.context = o_.context;
    mo.seq_len = o_.pipeline.seq_len;
  } else {
    // The class count from rank 0 (a leader: it has the dataset), through host memory.
    classes_ = rank_ == 0 ? train_->dataset()->header().classes.size() : 0;
    DDPIO_RETURN_IF_ERROR(
        comm::BroadcastHost(world_, &classes_, sizeof(classes_), 0, o_.pipeline.timeout));
  }
  const int side = o_.pipeline.image_size;
  mo.sizes = {tokens ? o_.context * static_cast<int>(classes_) : side * side * 3};
  mo.sizes.insert(mo.sizes.end(), o_.hidden.begin(), o_.hidden.end());
  mo.sizes.push_back(static_cast<int>(classes_));
  mo.init_seed = o_.init_seed;
  mo.momentum = o_.momentum;
  mo.weight_decay = o_.weight_decay;
  for (int c = 0; c < 3; ++c) {
    mo.mean[c] = o_.pipeline.mean[c];
    mo.stddev[c] = o_.pipeline.stddev[c];
  }
  if (o_.device == ModelDevice::kCuda) {
    Mlp initial(mo.sizes, mo.init_seed);  // the CPU model's initialisation, bit for bit
    const int devices = device::Probe().devices;
    DDPIO_ASSIGN_OR_RETURN(model_,
                           MakeDeviceModel(mo, initial.params(),
                                           device::DeviceForRank(job.info().local_rank, devices)));
    return absl::OkStatus();
  }
  std::string path;
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<MatMul> engine,
                         SelectMatMul(MatMulEngineName(o_.matmul), o_.blas_threads, &path));
  model_ = MakeCpuModel(mo, std::move(engine), path);
  return absl::OkStatus();
}

absl::Status TrainingRun::Resume() {
  DDPIO_RETURN_IF_ERROR(ResumeFromCheckpoint());
  if (o_.indices_out.empty()) return absl::OkStatus();
  DDPIO_ASSIGN_OR_RETURN(index_log_, IndexLog::Open(o_.indices_out, rank_));
  // One name for this attempt on every rank: rank 0's clock now, before any rank takes a step.
  int64_t attempt = IndexLog::Now();
  DDPIO_RETURN_IF_ERROR(world_.Broadcast(&attempt, sizeof(attempt), 0, o_.pipeline.timeout));
  const bool replicate = o_.pipeline.mode == broadcast::FeedMode::kReplicate;
  return index_log_->Start(attempt, world_.size(), replicate ? o_.pipeline.group_size : 1, epoch_,
                           step_);
}

absl::Status TrainingRun::ResumeFromCheckpoint() {
  if (rank_ == 0 && !o_.checkpoint_dir.empty()) RemoveStaleCheckpointTemp(o_.checkpoint_dir);
  if (!o_.resume || o_.checkpoint_dir.empty()) return absl::OkStatus();
  absl::StatusOr<Checkpoint> c = ReadCheckpoint(o_.checkpoint_dir, model_->num_params());
  if (absl::IsNotFound(c.status())) {
    if (rank_ == 0)
      DDPIO_LOG(INFO) << "resume: no checkpoint in " << o_.checkpoint_dir << " yet, starting fresh";
    return absl::OkStatus();
  }
  DDPIO_RETURN_IF_ERROR(c.status());
  if (c->params.size() != model_->num_params()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint in ", o_.checkpoint_dir, " holds ", c->params.size(),
                     " parameters, this model has ", model_->num_params()));
  }
  if (c->sampler_seed != o_.pipeline.seed || c->augment_seed != o_.pipeline.augment_seed ||
      c->dataset_size != train_->dataset_size()) {
    absl::Status mismatch = absl::FailedPreconditionError(absl::StrCat(
        "checkpoint in ", o_.checkpoint_dir, " was written with sampler seed ", c->sampler_seed,
        ", augmentation seed ", c->augment_seed, " on ", c->dataset_size, " samples; this job has ",
        o_.pipeline.seed, ", ", o_.pipeline.augment_seed, " and ", train_->dataset_size(),
        ": resuming would repeat and skip samples (resume with the same seed and dataset, or start "
        "in a new "
        "checkpoint directory)"));
    return WithSetting(WithSetting(WithSetting(mismatch, "seed"), "data"), "checkpoint_dir");
  }
  const bool block = o_.pipeline.order == sampler::Order::kBlock;
  if (c->order != o_.pipeline.order || (block && (c->block_chunk != o_.pipeline.block_chunk ||
                                                  c->block_window != o_.pipeline.block_window ||
                                                  c->block_lanes != train_->order_lanes()))) {
    const auto order = [](sampler::Order order, uint64_t chunk, uint64_t window, uint64_t lanes) {
      return order == sampler::Order::kBlock
                 ? absl::StrCat("the block order (", chunk, " records a chunk, a window of ",
                                window, " chunks, ", lanes, " lanes)")
                 : std::string("the exact order");
    };
    return WithSetting(
        WithSetting(
            absl::FailedPreconditionError(absl::StrCat(
                "checkpoint in ", o_.checkpoint_dir, " counts its position in ",
                order(c->order, c->block_chunk, c->block_window, c->block_lanes), "; this job has ",
                order(o_.pipeline.order, o_.pipeline.block_chunk, o_.pipeline.block_window,
                      train_->order_lanes()),
                ": resuming would repeat and skip samples (resume with the same order, "
                "or start in a new checkpoint directory)")),
            "order"),
        "checkpoint_dir");
  }
  DDPIO_RETURN_IF_ERROR(model_->SetState(c->params, c->momentum, c->momentum_started));
  epoch_ = c->epoch;
  position_ = c->position;
  step_ = c->step;
  if (rank_ == 0) {
    DDPIO_LOG(INFO) << "resuming from " << CheckpointPath(o_.checkpoint_dir) << ": epoch " << epoch_
                    << ", position " << position_ << ", step " << step_;
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::Save(uint64_t epoch, uint64_t position) {
  if (o_.checkpoint_dir.empty()) return absl::OkStatus();
  if (rank_ == 0) {
    Checkpoint c;
    c.epoch = epoch;
    c.position = position;
    c.step = step_;
    c.sampler_seed = o_.pipeline.seed;
    c.augment_seed = o_.pipeline.augment_seed;
    c.dataset_size = train_->dataset_size();
    c.order = o_.pipeline.order;
    if (c.order == sampler::Order::kBlock) {
      c.block_chunk = o_.pipeline.block_chunk;
      c.block_window = o_.pipeline.block_window;
      c.block_lanes = train_->order_lanes();
    }
    DDPIO_RETURN_IF_ERROR(model_->GetState(&c.params, &c.momentum, &c.momentum_started));
    DDPIO_RETURN_IF_ERROR(WriteCheckpoint(o_.checkpoint_dir, c));
  }
  return world_.Barrier(o_.pipeline.timeout);  // nobody runs ahead of a checkpoint that failed
}

absl::Status TrainingRun::CheckLabels(const loader::Batch& b) const {
  if (o_.pipeline.seq_len > 0) {             // every id of every window is an input or a label
    for (uint64_t k = 0; k < b.size; ++k) {  // a sequence's label is its source
      if (b.labels[k] < 0 || b.labels[k] >= static_cast<int32_t>(kMaxTokenSources)) {
        return absl::DataLossError(absl::StrCat("sample ", b.indices[k], " names source ",
                                                b.labels[k], ": not a sequence of this view"));
      }
    }
    const uint64_t ids = b.size * (o_.pipeline.seq_len + 1);
    const auto* id = reinterpret_cast<const uint32_t*>(b.data);
    for (uint64_t k = 0; k < ids; ++k) {
      if (id[k] >= classes_) {
        return absl::DataLossError(absl::StrCat(
            "token id ", id[k], " in sample ", b.indices[k / (o_.pipeline.seq_len + 1)],
            " is outside the vocabulary of ", classes_, " (inspect --verify checks every id)"));
      }
    }
    return absl::OkStatus();
  }
  for (uint64_t k = 0; k < b.size; ++k) {
    if (b.valid[k] != 0 && (b.labels[k] < 0 || static_cast<uint64_t>(b.labels[k]) >= classes_)) {
      return absl::DataLossError(absl::StrCat("sample ", b.indices[k], " has label ", b.labels[k],
                                              ", outside the dataset's ", classes_, " classes"));
    }
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::MicroBatch(const loader::Batch& b, double scale, bool last_micro) {
  if (!last_micro) {  // no_sync: gradients accumulate locally
    model_->ForwardBackward(b, scale, {});
    return absl::OkStatus();
  }
  reducer_->Begin();
  model_->ForwardBackward(b, scale, [&](int layer) { reducer_->LayerReady(layer); });
  const auto finish = Clock::now();
  DDPIO_RETURN_IF_ERROR(reducer_->Finish());
  step_allreduce_s_ = Seconds(Clock::now() - finish);
  DDPIO_ASSIGN_OR_RETURN(step_loss_, model_->TakeLoss());
  holds_.clear();  // the step's batches have been read
  DDPIO_RETURN_IF_ERROR(model_->status());
  // The averaged gradients are the same on every rank, so every rank stops at this step.
  DDPIO_ASSIGN_OR_RETURN(bool finite, model_->GradientsFinite());
  if (!finite) {
    return WithSetting(
        absl::InvalidArgumentError(absl::StrFormat(
            "training diverged at epoch %d, step %d: the averaged gradients are not finite "
            "(loss %g); lower the learning rate or check the data",
            epoch_, step_, step_loss_)),
        "learning_rate");
  }
  model_->Step(schedule_.At(step_));
  model_->ZeroGrad();
  if (o_.compute_ms > 0)
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o_.compute_ms));
  ++step_;
  ++result_.steps;
  loss_sum_ += step_loss_;
  ++loss_steps_;
  step_loss_ = 0;
  return absl::OkStatus();
}

void TrainingRun::ReportProgress(uint64_t n, uint64_t batches) {
  if (rank_ != 0 || o_.progress_every <= 0 || !progress_ || result_.steps % o_.progress_every != 0)
    return;
  const uint64_t a = static_cast<uint64_t>(o_.accumulate);
  progress_(absl::StrFormat("epoch %d step %d/%d  loss %.4f  lr %.4g  %.0f samples/s  stall %.1f%%",
                            epoch_, (n + a) / a, (batches + a - 1) / a, loss_sum_ / loss_steps_,
                            schedule_.At(step_ - 1), samples_ / (wait_s_ + busy_s_),
                            100 * wait_s_ / (wait_s_ + busy_s_)));
}

absl::Status TrainingRun::RunEpoch(bool* stopped) {
  DDPIO_RETURN_IF_ERROR(train_->StartEpoch(epoch_, position_));
  const uint64_t batches = train_->NumBatches();
  loss_sum_ = 0;
  loss_steps_ = 0;
  step_loss_ = 0;
  model_->ZeroGrad();
  int micro = 0;
  for (uint64_t n = 0;; ++n) {
    const auto t0 = Clock::now();
    absl::StatusOr<loader::HeldBatch> held = train_->NextHeld();
    const auto t1 = Clock::now();
    if (absl::IsOutOfRange(held.status()))
      return profiler_->steps() > 0 ? ReportSteps() : absl::OkStatus();
    DDPIO_RETURN_IF_ERROR(held.status());
    wait_s_ += Seconds(t1 - t0);
    step_wait_s_ += Seconds(t1 - t0);
    holds_.push_back(std::move(held->hold));
    const loader::Batch* b = &held->batch;
    DDPIO_RETURN_IF_ERROR(CheckLabels(*b));
    if (o_.pipeline.seq_len > 0) {
      std::vector<uint64_t>& per = result_.sequences_per_source;
      for (uint64_t k = 0; k < b->size; ++k) {
        if (b->valid[k] == 0) continue;
        const auto s = static_cast<size_t>(b->labels[k]);
        if (per.size() <= s) per.resize(s + 1, 0);
        ++per[s];
      }
    }
    const bool last_micro = ++micro == o_.accumulate || n + 1 == batches;
    if (index_log_ != nullptr) {
      index_log_->Add(*b);
      // Logged before this rank's gradients go into the all-reduce: a step the all-reduce
      // completed anywhere (and a checkpoint may cover) was logged by every rank; a step that
      // failed is redone after the restart, and the tally drops its lines.
      if (last_micro) DDPIO_RETURN_IF_ERROR(index_log_->Step(epoch_, step_ + 1));
    }
    // Each micro-batch's mean loss / the micro-batches in this step (fewer at an epoch's end).
    const uint64_t in_step = std::min<uint64_t>(o_.accumulate, batches - (n + 1 - micro));
    DDPIO_RETURN_IF_ERROR(MicroBatch(
        *b, 1.0 / (static_cast<double>(b->size) * static_cast<double>(in_step)), last_micro));
    samples_ += b->size;
    busy_s_ += Seconds(Clock::now() - t1);
    step_busy_s_ += Seconds(Clock::now() - t1);
    if (!last_micro) continue;
    micro = 0;
    profiler_->AddStep(step_wait_s_, step_busy_s_ - step_allreduce_s_, step_allreduce_s_,
                       train_->counters());
    step_wait_s_ = step_busy_s_ = step_allreduce_s_ = 0;
    ReportProgress(n, batches);
    if (o_.report_every > 0 && profiler_->steps() >= static_cast<uint64_t>(o_.report_every))
      DDPIO_RETURN_IF_ERROR(ReportSteps());
    const bool stop = o_.stop_after_steps > 0 && result_.steps == o_.stop_after_steps;
    if (stop || (o_.checkpoint_every > 0 && step_ % o_.checkpoint_every == 0)) {
      DDPIO_RETURN_IF_ERROR(Save(epoch_, train_->ResumePosition()));
    }
    if (stop) {
      result_.feeder = train_->counters();
      result_.store = train_->store_counters();
      train_->Close();  // mid-epoch: every rank stops here together
      *stopped = true;
      return absl::OkStatus();
    }
  }
}

absl::Status TrainingRun::ReportSteps() {
  RankSteps mine = profiler_->Take();
  DDPIO_ASSIGN_OR_RETURN(std::vector<RankSteps> ranks,
                         GatherStepReport(world_, mine, o_.pipeline.timeout));
  StepReport report = Analyze(std::move(ranks), epoch_, report_first_step_, step_);
  report_first_step_ = step_;
  if (rank_ == 0) {
    if (progress_) progress_(StepReportTable(report));
    if (!o_.metrics_file.empty()) {
      // The metrics are an aid: a file that cannot be written (a full disk, a missing folder) is
      // a warning, never the end of the training (the other ranks would wait for rank 0).
      if (absl::Status st = WriteMetricsFile(o_.metrics_file, StepReportPrometheus(report));
          !st.ok()) {
        DDPIO_LOG(WARNING) << "the step report's metrics file was not written: " << st.message();
      }
    }
  }
  result_.step_report = std::move(report);
  ++result_.step_reports;
  return absl::OkStatus();
}

absl::Status TrainingRun::Validate() {
  if (val_ == nullptr) return absl::OkStatus();
  DDPIO_ASSIGN_OR_RETURN(auto acc, Evaluate(*val_, *model_, world_, o_.pipeline.timeout));
  DDPIO_RETURN_IF_ERROR(model_->status());
  result_.val_accuracy = acc.first;
  result_.val_samples = acc.second;
  if (rank_ == 0 && progress_) {
    progress_(absl::StrFormat("epoch %d: validation accuracy %.4f over %d samples", epoch_,
                              acc.first, acc.second));
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::Run() {
  report_first_step_ = step_;
  for (; epoch_ < static_cast<uint64_t>(o_.epochs); ++epoch_, position_ = 0) {
    bool stopped = false;
    DDPIO_RETURN_IF_ERROR(RunEpoch(&stopped));
    if (stopped) return absl::OkStatus();
    DDPIO_RETURN_IF_ERROR(Save(epoch_ + 1, 0));
    DDPIO_RETURN_IF_ERROR(Validate());
  }
  result_.feeder = train_->counters();
  result_.store = train_->store_counters();
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> TrainingRun::Result() {
  result_.train_loss = loss_steps_ > 0 ? loss_sum_ / loss_steps_ : 0;
  result_.samples_per_s = samples_ / std::max(1e-9, wait_s_ + busy_s_);
  result_.stall_fraction = wait_s_ / std::max(1e-9, wait_s_ + busy_s_);
  std::vector<float> momentum;
  bool started = false;
  DDPIO_RETURN_IF_ERROR(Annotate(model_->GetState(&result_.params, &momentum, &started),
                                 "reading the parameters back"));
  result_.param_checksum = ParamChecksum(result_.params);
  result_.path = model_->Describe();
  return result_;
}

}  // namespace

absl::StatusOr<TrainResult> Train(comm::Job& job, const TrainOptions& o,
                                  const std::function<void(const std::string&)>& progress) {
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<TrainingRun> run, TrainingRun::Open(job, o, progress));
  DDPIO_RETURN_IF_ERROR(run->Resume());
  DDPIO_RETURN_IF_ERROR(run->Run());
  return run->Result();
}

}  // namespace ddpio::trainer
