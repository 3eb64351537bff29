// The trainer with its model on the device, linked against the stand-ins for the CUDA runtime
// (cuda_standin.cc), NCCL (nccl_standin.cc), cuBLAS (cublas_standin.cc) and ddpio's kernels
// (kernels_standin.cc):
// "device" memory is host memory, streams are in-order threads, products are OpenBLAS's. The
// device model must compute what the CPU model computes, and a 4-rank job on NCCL must reach the
// CPU trainer's parameters, also across a stop and resume mid-epoch.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "ddpio/trainer/train_model.h"
#include "ddpio/trainer/trainer.h"
#include "gtest/gtest.h"
#include "tests/support/dataset_fixtures.h"
#include "tests/support/multiprocess.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_runs.h"

namespace ddpio::trainer {
namespace {

using ddpio::testing::RankOut;
using ddpio::testing::RelativeDifference;
using ddpio::testing::TrainJob;

// Runs `body` in a child process: the stand-in's stream threads must not exist in the parent
// when later tests fork their ranks (ThreadSanitizer refuses threads after a multi-threaded fork).
void ExpectInAChild(void (*body)()) {
  const std::vector<int> codes = ddpio::testing::RunForked(1, [&](int) {
    body();
    return ::testing::Test::HasFailure() ? 1 : 0;
  });
  EXPECT_EQ(codes, std::vector<int>{0}) << "the child's failures are above";
}

ModelOptions SmallModel() {
  ModelOptions o;
  o.sizes = {6 * 6 * 3, 16, 8, 5};
  o.init_seed = 9;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  o.mean = {0.485f, 0.456f, 0.406f};
  o.stddev = {0.229f, 0.224f, 0.225f};
  return o;
}

// A batch whose pixels live in host memory (`pixels`) or in a "device" buffer (`device`).
struct TestBatch {
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  std::vector<uint64_t> indices;
  std::vector<uint8_t> valid;
  void* device = nullptr;
  loader::Batch Get(bool on_device) const {
    loader::Batch b;
    b.size = labels.size();
    b.data = on_device ? nullptr : pixels.data();
    b.device_data = on_device ? device : nullptr;
    b.labels = labels.data();
    b.indices = indices.data();
    b.valid = valid.data();
    return b;
  }
};

TestBatch RandomBatch(std::mt19937& rng, int batch, int inputs, int classes) {
  TestBatch t;
  std::uniform_int_distribution<int> px(0, 255), label(0, classes - 1);
  for (int i = 0; i < batch * inputs; ++i) t.pixels.push_back(static_cast<uint8_t>(px(rng)));
  for (int i = 0; i < batch; ++i) {
    t.labels.push_back(i == 1 ? -1 : label(rng));  // sample 1 left out, as a skipped bad sample is
    t.indices.push_back(i);
    t.valid.push_back(i == 1 ? 0 : 1);
  }
  EXPECT_EQ(cudaMalloc(&t.device, t.pixels.size()), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpyAsync(t.device, t.pixels.data(), t.pixels.size(), cudaMemcpyHostToDevice, nullptr),
      cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  return t;
}

// Three optimizer steps, two micro-batches each (one from host memory, one from the device),
// then a prediction: losses, layer order, parameters, momentum and predicted classes of the
// device model equal the CPU model's bit for bit (the stand-ins run the same arithmetic).
void ComputesWhatTheCpuModelComputesBitForBit() {
  const ModelOptions o = SmallModel();
  std::string why;
  auto engine = SelectMatMul("cpu", 1, &why);
  ASSERT_OK(engine.status());
  std::unique_ptr<TrainModel> cpu = MakeCpuModel(o, *std::move(engine), why);
  std::vector<float> initial, momentum;
  bool started = true;
  ASSERT_OK(cpu->GetState(&initial, &momentum, &started));
  auto device = MakeDeviceModel(o, initial, 0);
  ASSERT_OK(device.status());
  EXPECT_NE((*device)->Describe().find("cuda"), std::string::npos);
  ASSERT_NE((*device)->layer_event(0), nullptr);

  std::mt19937 rng(5);
  const int classes = o.sizes.back();
  for (int step = 0; step < 3; ++step) {
    const TestBatch a = RandomBatch(rng, 7, o.sizes[0], classes),
                    b = RandomBatch(rng, 4, o.sizes[0], classes);
    std::vector<int> order[2];
    for (int m = 0; m < 2; ++m) {
      TrainModel& model = m == 0 ? *cpu : **device;
      model.ForwardBackward(a.Get(false), 1.0 / 14, {});
      model.ForwardBackward(b.Get(m == 1), 1.0 / 8, [&](int layer) { order[m].push_back(layer); });
    }
    EXPECT_EQ(order[0], (std::vector<int>{2, 1, 0}));
    EXPECT_EQ(order[1], order[0]);
    auto lc = cpu->TakeLoss(), ld = (*device)->TakeLoss();
    ASSERT_OK(ld.status());
    EXPECT_EQ(*lc, *ld) << "step " << step;
    EXPECT_GT(*lc, 0);
    auto fd = (*device)->GradientsFinite();
    ASSERT_OK(fd.status());
    EXPECT_TRUE(*fd);
    for (TrainModel* m : {cpu.get(), device->get()}) {
      m->Step(0.05);
      m->ZeroGrad();
    }
    std::vector<float> pc, pd, mc, md;
    bool sc = false, sd = false;
    ASSERT_OK(cpu->GetState(&pc, &mc, &sc));
    ASSERT_OK((*device)->GetState(&pd, &md, &sd));
    EXPECT_EQ(pc, pd) << "step " << step;
    EXPECT_EQ(mc, md) << "step " << step;
    EXPECT_TRUE(sd);
    std::vector<int> cc, cd;
    ASSERT_OK(cpu->Predict(b.Get(false), &cc));
    ASSERT_OK((*device)->Predict(b.Get(true), &cd));
    EXPECT_EQ(cc, cd);
    cudaFree(a.device);
    cudaFree(b.device);
  }
  ASSERT_OK((*device)->status());
}
TEST(DeviceModel, ComputesWhatTheCpuModelComputesBitForBit) {
  ExpectInAChild(ComputesWhatTheCpuModelComputesBitForBit);
}

// A NaN in the parameters makes the device's gradients non-finite, and the device says so.
void NonFiniteGradientsAreSeen() {
  const ModelOptions o = SmallModel();
  Mlp mlp(o.sizes, o.init_seed);
  std::vector<float> params = mlp.params();
  params[3] = std::nanf("");
  auto device = MakeDeviceModel(o, params, 0);
  ASSERT_OK(device.status());
  std::mt19937 rng(1);
  const TestBatch a = RandomBatch(rng, 4, o.sizes[0], o.sizes.back());
  (*device)->ForwardBackward(a.Get(true), 0.25, {});
  ASSERT_OK((*device)->TakeLoss().status());
  auto finite = (*device)->GradientsFinite();
  ASSERT_OK(finite.status());
  EXPECT_FALSE(*finite);
  cudaFree(a.device);
}
TEST(DeviceModel, NonFiniteGradientsAreSeen) { ExpectInAChild(NonFiniteGradientsAreSeen); }

// The device runs out of memory for a batch's activations: every layer is still reported (a
// rank whose all-reduces stopped matching the others' would hang them), nothing more is
// queued, and the error comes out of TakeLoss naming the allocation.
void AnAllocationFailureReportsEveryLayerAndTheError() {
  const ModelOptions o = SmallModel();
  Mlp mlp(o.sizes, o.init_seed);
  auto device = MakeDeviceModel(o, mlp.params(), 0);
  ASSERT_OK(device.status());
  std::mt19937 rng(2);
  const TestBatch a = RandomBatch(rng, 64, o.sizes[0], o.sizes.back());
  ::setenv("DDPIO_NCCL_STANDIN_DEVICE_BYTES", "1", 1);  // nothing more fits
  std::vector<int> reported;
  (*device)->ForwardBackward(a.Get(true), 1.0 / 64, [&](int layer) { reported.push_back(layer); });
  ::unsetenv("DDPIO_NCCL_STANDIN_DEVICE_BYTES");
  EXPECT_EQ(reported, (std::vector<int>{2, 1, 0}));
  auto loss = (*device)->TakeLoss();
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(loss.status().message().find("cudaMalloc"), std::string::npos) << loss.status();
  EXPECT_FALSE((*device)->status().ok());
  cudaFree(a.device);
}
TEST(DeviceModel, AnAllocationFailureReportsEveryLayerAndTheError) {
  ExpectInAChild(AnAllocationFailureReportsEveryLayerAndTheError);
}

class DeviceTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("DDPIO_NCCL_STANDIN_DEVICES", "2", 1);  // inherited by the forked ranks
    data_ = dir_.Sub("train");
    ASSERT_OK(ddpio::testing::WriteJpegDataset(data_, 48, 24));
  }
  void TearDown() override { ::unsetenv("DDPIO_NCCL_STANDIN_DEVICES"); }

  TrainOptions Options(const std::string& device) const {
    TrainOptions o;
    o.pipeline.data = data_;
    o.val = data_;
    o.epochs = 2;
    o.pipeline.group_size = 2;
    o.pipeline.payload =
        broadcast::FeedPayload::kDecoded;  // over NCCL: batches arrive on the device
    o.pipeline.batch_size = 3;
    o.pipeline.image_size = 8;
    o.pipeline.workers = 1;
    o.pipeline.seed = 3;
    o.pipeline.augment_seed = 4;
    o.pipeline.timeout = std::chrono::seconds(30);  // also every collective
    o.hidden = {16, 8};
    o.lr = 0.05;
    o.accumulate = 2;
    o.bucket_bytes = 256;  // one bucket per layer: all-reduces overlapping backward
    o.progress_every = 0;
    o.device = *ParseModelDevice(device);
    o.matmul = MatMulEngine::kCpu;
    return o;
  }

  ddpio::testing::TempDir dir_;
  std::string data_;
};

// 4 ranks in groups of 2 on NCCL, the model on each rank's device, batches device to device,
// gradient accumulation and per-layer buckets: every rank ends with the CPU trainer's
// parameters (through the stand-ins, bit for bit: the same products, kernels and sums), the same
// validation accuracy over every sample once, and the same step count.
TEST_F(DeviceTrainer, FourRanksReachTheCpuTrainersParameters) {
  const std::vector<RankOut> cpu =
      TrainJob(4, Options("cpu"), dir_.path(), "cpu", comm::BackendKind::kGloo);
  const std::vector<RankOut> gpu =
      TrainJob(4, Options("cuda"), dir_.path(), "gpu", comm::BackendKind::kNccl);
  for (int r = 0; r < 4; ++r) {
    ASSERT_FALSE(gpu[r].params.empty()) << "rank " << r;
    EXPECT_LE(RelativeDifference(gpu[r].params, cpu[r].params), 1e-5) << "rank " << r;
    EXPECT_EQ(gpu[r].params, cpu[r].params) << "rank " << r << ": not bit for bit";
    EXPECT_EQ(gpu[r].checksum, gpu[0].checksum) << "rank " << r;
    EXPECT_EQ(gpu[r].steps, cpu[r].steps);
    EXPECT_EQ(gpu[r].val_samples, 48u);
    EXPECT_EQ(gpu[r].val_accuracy, cpu[r].val_accuracy);
  }
}

// Stopped mid-epoch after 3 of its 4 steps (2 per epoch: the checkpoint is copied back from the
// device halfway through epoch 1) and resumed on the device: the same parameters as the run that
// never stopped.
TEST_F(DeviceTrainer, ResumeMidEpochContinuesExactly) {
  const std::vector<RankOut> straight =
      TrainJob(4, Options("cuda"), dir_.path(), "straight", comm::BackendKind::kNccl);
  TrainOptions first = Options("cuda");
  first.checkpoint_dir = dir_.Sub("ckpt");
  first.stop_after_steps = 3;
  const std::vector<RankOut> stopped =
      TrainJob(4, first, dir_.path(), "stopped", comm::BackendKind::kNccl);
  EXPECT_EQ(stopped[0].steps, 3u);
  EXPECT_EQ(straight[0].steps, 4u);
  TrainOptions second = first;
  second.stop_after_steps = 0;
  second.resume = true;
  const std::vector<RankOut> resumed =
      TrainJob(4, second, dir_.path(), "resumed", comm::BackendKind::kNccl);
  for (int r = 0; r < 4; ++r) {
    ASSERT_FALSE(resumed[r].params.empty()) << "rank " << r;
    EXPECT_EQ(resumed[r].params, straight[r].params) << "rank " << r;
    EXPECT_EQ(stopped[r].steps + resumed[r].steps, straight[r].steps);
  }
}

// Rank 0 (a group leader, and a member of every all-reduce) dies after its second step: every
// other rank's training fails with Unavailable well within the timeout, never hangs.
TEST_F(DeviceTrainer, AKilledRankIsUnavailableOnTheOthersWithinTheTimeout) {
  TrainOptions o = Options("cuda");
  o.epochs = 1000;
  o.progress_every = 1;  // rank 0's progress callback is where it dies
  comm::RendezvousOptions ro;
  ro.token = "train";
  ro.job_id = "killed";
  ro.backend = comm::BackendKind::kNccl;
  const auto codes = comm::testing::RunJob(4, ro, [&](comm::Job& job) -> int {
    const auto t0 = std::chrono::steady_clock::now();
    int steps = 0;
    auto r = Train(job, o, [&](const std::string&) {
      if (++steps == 2) std::_Exit(42);
    });
    const auto took = std::chrono::steady_clock::now() - t0;
    std::fprintf(stderr, "rank %d: %s\n", job.info().rank, r.status().ToString().c_str());
    std::_Exit(absl::IsUnavailable(r.status()) && took < std::chrono::seconds(15) ? 0 : 12);
  });
  EXPECT_EQ(codes, (std::vector<int>{42, 0, 0, 0}));
}

// --device cuda needs an NCCL job, and an NCCL job needs the model on the device: refused
// before any data moves, on every rank.
TEST_F(DeviceTrainer, DeviceAndBackendMustAgree) {
  for (auto [device, backend] :
       {std::pair{"cuda", comm::BackendKind::kGloo}, std::pair{"cpu", comm::BackendKind::kNccl}}) {
    comm::RendezvousOptions ro;
    ro.token = "train";
    ro.job_id = std::string("mismatch-") + device;
    ro.backend = backend;
    const TrainOptions o = Options(device);
    const auto codes = comm::testing::RunJob(2, ro, [&](comm::Job& job) {
      auto r = Train(job, o);
      std::fprintf(stderr, "rank %d: %s\n", job.info().rank, r.status().ToString().c_str());
      return absl::IsInvalidArgument(r.status()) ? 0 : 1;
    });
    EXPECT_EQ(codes, std::vector<int>(2, 0)) << device;
  }
}

}  // namespace
}  // namespace ddpio::trainer
