#include "ddpio/trainer/trainer.h"

#include <cmath>

#include <algorithm>
#include <array>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/trainer/blas.h"
#include "ddpio/trainer/checkpoint.h"
#include "ddpio/trainer/grad_reducer.h"
#include "ddpio/trainer/mlp.h"

namespace ddpio::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// uint8 H,W,C -> float, (x / 255 - mean) / std per channel (the consumer-side normalisation).
class Normalizer {
 public:
  explicit Normalizer(const loader::LoaderOptions& o) {
    for (int c = 0; c < 3; ++c) {
      for (int v = 0; v < 256; ++v) lut_[c][v] = (v / 255.0f - o.mean[c]) / o.stddev[c];
    }
  }
  void Apply(const uint8_t* in, size_t pixels, float* out) const {
    for (size_t i = 0; i < pixels; ++i) {
      out[3 * i] = lut_[0][in[3 * i]];
      out[3 * i + 1] = lut_[1][in[3 * i + 1]];
      out[3 * i + 2] = lut_[2][in[3 * i + 2]];
    }
  }

 private:
  std::array<std::array<float, 256>, 3> lut_{};
};

bool AllFinite(const std::vector<float>& v) {
  float sum = 0;  // NaN and infinities survive a sum
  for (float x : v) sum += x * 0.0f;
  return std::isfinite(sum);
}

struct Feed {
  std::unique_ptr<storage::DatasetReader> reader;  // ranks that read (leaders, or all)
  std::unique_ptr<broadcast::GroupFeeder> feeder;
};

absl::StatusOr<Feed> MakeFeed(comm::Job& job, const comm::GroupLayout& layout, const std::string& path,
                              const broadcast::FeederOptions& options) {
  Feed f;
  if (layout.is_leader(job.info().rank) || options.readers == broadcast::FeedReaders::kAll) {
    DDPIO_ASSIGN_OR_RETURN(f.reader, storage::DatasetReader::Open(path, {}));
  }
  DDPIO_ASSIGN_OR_RETURN(auto group, job.Group(layout));
  DDPIO_ASSIGN_OR_RETURN(f.feeder, broadcast::GroupFeeder::Create(f.reader.get(), layout, job.info().rank,
                                                                  std::move(group), options));
  return f;
}

// Accuracy over every validation sample exactly once: mask padding, sums all-reduced.
absl::StatusOr<std::pair<double, uint64_t>> Evaluate(broadcast::GroupFeeder& val, Mlp& model, const Normalizer& norm,
                                                     comm::Communicator& world,
                                                     std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(val.StartEpoch(0));
  std::vector<float> x;
  std::vector<int> predicted;
  const size_t pixels = static_cast<size_t>(model.inputs()) / 3;
  float sums[2] = {0, 0};  // correct, counted: exact in float up to 2^24 samples
  for (;;) {
    absl::StatusOr<loader::Batch> b = val.Next();
    if (absl::IsOutOfRange(b.status())) break;
    DDPIO_RETURN_IF_ERROR(b.status());
    x.resize(b->size * model.inputs());
    for (uint64_t k = 0; k < b->size; ++k) norm.Apply(b->data + k * pixels * 3, pixels, x.data() + k * model.inputs());
    model.Predict(x.data(), static_cast<int>(b->size), &predicted);
    for (uint64_t k = 0; k < b->size; ++k) {
      if (!b->valid[k]) continue;
      sums[1] += 1;
      if (predicted[k] == b->labels[k]) sums[0] += 1;
    }
  }
  DDPIO_RETURN_IF_ERROR(world.AllReduce(sums, 2, comm::ReduceOp::kSum, timeout));
  return std::make_pair(sums[1] > 0 ? static_cast<double>(sums[0]) / sums[1] : 0.0, static_cast<uint64_t>(sums[1]));
}

}  // namespace

absl::StatusOr<TrainResult> Train(comm::Job& job, const TrainOptions& o,
                                  const std::function<void(const std::string&)>& progress) {
  if (o.accumulate < 1 || o.epochs < 1 || o.feeder.loader.output != loader::OutputFormat::kUint8Nhwc) {
    return absl::InvalidArgumentError("accumulate and epochs must be positive; the trainer takes uint8 batches");
  }
  std::string path;
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<MatMul> engine, SelectMatMul(o.matmul, o.blas_threads, &path));
  comm::Communicator& world = job.world();
  const int rank = job.info().rank;
  DDPIO_ASSIGN_OR_RETURN(auto kind, comm::ParseLayoutKind(o.layout));
  DDPIO_ASSIGN_OR_RETURN(auto layout, comm::GroupLayout::Make(job.info().world_size, o.group_size, kind));
  DDPIO_ASSIGN_OR_RETURN(Feed train, MakeFeed(job, layout, o.data, o.feeder));
  Feed val;
  if (!o.val.empty()) {
    broadcast::FeederOptions vo = o.feeder;
    vo.mode = broadcast::FeedMode::kShard;
    vo.sampler.shuffle = false;
    vo.sampler.padding = sampler::Padding::kMask;  // every sample once, padding flagged
    vo.loader.augment.train = false;
    vo.loader.drop_last = false;
    DDPIO_ASSIGN_OR_RETURN(val, MakeFeed(job, layout, o.val, vo));
  }
  // The class count from rank 0 (a leader: it has the dataset).
  uint64_t classes = rank == 0 ? train.reader->header().classes.size() : 0;
  DDPIO_RETURN_IF_ERROR(world.Broadcast(&classes, sizeof(classes), 0, o.timeout));
  const int side = o.feeder.loader.augment.size;
  std::vector<int> sizes = {side * side * 3};
  sizes.insert(sizes.end(), o.hidden.begin(), o.hidden.end());
  sizes.push_back(static_cast<int>(classes));
  Mlp model(sizes, o.init_seed, engine.get());
  // Identical initial parameters everywhere: rank 0's.
  DDPIO_RETURN_IF_ERROR(world.Broadcast(model.params().data(), model.params().size() * sizeof(float), 0, o.timeout));
  Sgd sgd(model.params().size(), o.momentum, o.weight_decay);
  uint64_t epoch = 0, position = 0, step = 0;
  if (rank == 0 && !o.checkpoint_dir.empty()) RemoveStaleCheckpointTemp(o.checkpoint_dir);
  if (o.resume && !o.checkpoint_dir.empty()) {
    absl::StatusOr<Checkpoint> c = ReadCheckpoint(o.checkpoint_dir);
    if (c.ok()) {
      if (c->params.size() != model.params().size()) {
        return absl::FailedPreconditionError(absl::StrCat("checkpoint in ", o.checkpoint_dir, " holds ",
                                                          c->params.size(), " parameters, this model has ",
                                                          model.params().size()));
      }
      if (c->sampler_seed != o.feeder.sampler.seed || c->augment_seed != o.feeder.loader.seed ||
          c->dataset_size != train.feeder->dataset_size()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint in ", o.checkpoint_dir, " was written with sampler seed ", c->sampler_seed,
            ", augmentation seed ", c->augment_seed, " on ", c->dataset_size, " samples; this job has ",
            o.feeder.sampler.seed, ", ", o.feeder.loader.seed, " and ", train.feeder->dataset_size(),
            ": resuming would repeat and skip samples (same --seed and --data, or a new --checkpoint-dir)"));
      }
      model.params() = c->params;
      sgd.buffers() = c->momentum;
      sgd.started() = c->momentum_started;
      epoch = c->epoch;
      position = c->position;
      step = c->step;
      if (rank == 0) DDPIO_LOG(INFO) << "resuming from " << CheckpointPath(o.checkpoint_dir) << ": epoch " << epoch
                                     << ", position " << position << ", step " << step;
    } else if (!absl::IsNotFound(c.status())) {
      return c.status();
    } else if (rank == 0) {
      DDPIO_LOG(INFO) << "--resume: no checkpoint in " << o.checkpoint_dir << " yet, starting fresh";
    }
  }
  DDPIO_ASSIGN_OR_RETURN(uint64_t batches_per_epoch, train.feeder->BatchesInEpoch(0));
  Schedule schedule{o.lr, o.warmup_steps, 0, o.decay, o.step_size, 0.1};
  schedule.total_steps = static_cast<uint64_t>(o.epochs) * ((batches_per_epoch + o.accumulate - 1) / o.accumulate);
  GradReducer reducer(&world, &model.grads(), model.layers(), o.bucket_bytes, o.timeout);
  const Normalizer norm(o.feeder.loader);
  const size_t pixels = static_cast<size_t>(side) * side;
  std::vector<float> x;
  TrainResult result;
  double wait_s = 0, busy_s = 0, loss_sum = 0;
  uint64_t samples = 0, loss_steps = 0;
  auto save = [&](uint64_t e, uint64_t pos) -> absl::Status {
    if (o.checkpoint_dir.empty()) return absl::OkStatus();
    if (rank == 0) {
      Checkpoint c{e,           pos,           step, o.feeder.sampler.seed, o.feeder.loader.seed, train.feeder->dataset_size(),
                   sgd.started(), model.params(), sgd.buffers()};
      DDPIO_RETURN_IF_ERROR(WriteCheckpoint(o.checkpoint_dir, c));
    }
    return world.Barrier(o.timeout);  // nobody runs ahead of a checkpoint that failed
  };
  for (; epoch < static_cast<uint64_t>(o.epochs); ++epoch, position = 0) {
    DDPIO_RETURN_IF_ERROR(train.feeder->StartEpoch(epoch, position));
    const uint64_t batches = train.feeder->NumBatches();
    loss_sum = 0;
    loss_steps = 0;
    model.ZeroGrad();
    int micro = 0;
    double step_loss = 0;
    for (uint64_t n = 0;; ++n) {
      const auto t0 = Clock::now();
      absl::StatusOr<loader::Batch> b = train.feeder->Next();
      const auto t1 = Clock::now();
      if (absl::IsOutOfRange(b.status())) break;
      DDPIO_RETURN_IF_ERROR(b.status());
      wait_s += Seconds(t1 - t0);
      for (uint64_t k = 0; k < b->size; ++k) {
        if (b->valid[k] != 0 && (b->labels[k] < 0 || static_cast<uint64_t>(b->labels[k]) >= classes)) {
          return absl::DataLossError(absl::StrCat("sample ", b->indices[k], " has label ", b->labels[k],
                                                  ", outside the dataset's ", classes, " classes"));
        }
      }
      x.resize(b->size * model.inputs());
      for (uint64_t k = 0; k < b->size; ++k) norm.Apply(b->data + k * pixels * 3, pixels, x.data() + k * model.inputs());
      const bool last_micro = ++micro == o.accumulate || n + 1 == batches;
      // Each micro-batch's mean loss / the micro-batches in this step (fewer at an epoch's end).
      const uint64_t in_step = std::min<uint64_t>(o.accumulate, batches - (n + 1 - micro));
      const double scale = 1.0 / (static_cast<double>(b->size) * static_cast<double>(in_step));
      if (last_micro) {
        reducer.Begin();
        step_loss += model.ForwardBackward(x.data(), b->labels, static_cast<int>(b->size), scale,
                                           [&](int layer) { reducer.LayerReady(layer); });
        DDPIO_RETURN_IF_ERROR(reducer.Finish());
        DDPIO_RETURN_IF_ERROR(engine->status());
        // The averaged gradients are the same on every rank, so every rank stops at this step.
        if (!AllFinite(model.grads())) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "training diverged at epoch %d, step %d: the averaged gradients are not finite (loss %g); "
              "lower --lr or check the data",
              epoch, step, step_loss));
        }
        sgd.Step(model.params(), model.grads(), schedule.At(step));
        model.ZeroGrad();
        if (o.compute_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.compute_ms));
        ++step;
        ++result.steps;
        loss_sum += step_loss;
        ++loss_steps;
        step_loss = 0;
        micro = 0;
      } else {  // no_sync: gradients accumulate locally
        step_loss += model.ForwardBackward(x.data(), b->labels, static_cast<int>(b->size), scale);
      }
      samples += b->size;
      busy_s += Seconds(Clock::now() - t1);
      if (!last_micro) continue;
      if (rank == 0 && o.progress_every > 0 && progress && result.steps % o.progress_every == 0) {
        progress(absl::StrFormat("epoch %d step %d/%d  loss %.4f  lr %.4g  %.0f samples/s  stall %.1f%%", epoch,
                                 (n + 1 + o.accumulate - 1) / o.accumulate,
                                 (batches + o.accumulate - 1) / o.accumulate, loss_sum / loss_steps,
                                 schedule.At(step - 1), samples / (wait_s + busy_s),
                                 100 * wait_s / (wait_s + busy_s)));
      }
      const bool stop = o.stop_after_steps > 0 && result.steps == o.stop_after_steps;
      if (stop || (o.checkpoint_every > 0 && step % o.checkpoint_every == 0)) {
        DDPIO_RETURN_IF_ERROR(save(epoch, train.feeder->ResumePosition()));
      }
      if (stop) {
        train.feeder.reset();  // mid-epoch: every rank stops here together
        break;
      }
    }
    if (train.feeder == nullptr) break;
    DDPIO_RETURN_IF_ERROR(save(epoch + 1, 0));
    if (val.feeder != nullptr) {
      DDPIO_ASSIGN_OR_RETURN(auto acc, Evaluate(*val.feeder, model, norm, world, o.timeout));
      DDPIO_RETURN_IF_ERROR(engine->status());
      result.val_accuracy = acc.first;
      result.val_samples = acc.second;
      if (rank == 0 && progress) {
        progress(absl::StrFormat("epoch %d: validation accuracy %.4f over %d samples", epoch, acc.first, acc.second));
      }
    }
  }
  result.train_loss = loss_steps > 0 ? loss_sum / loss_steps : 0;
  result.samples_per_s = samples / std::max(1e-9, wait_s + busy_s);
  result.stall_fraction = wait_s / std::max(1e-9, wait_s + busy_s);
  result.param_checksum = ParamChecksum(model.params());
  result.path = path;
  if (train.feeder != nullptr) result.feeder = train.feeder->counters();
  result.params = model.params();
  return result;
}

}  // namespace ddpio::trainer
