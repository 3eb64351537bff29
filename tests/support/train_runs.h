// Running the bundled trainer on real rank processes and reading back what each rank ended with;
// shared by the trainer's tests over Gloo (ddpio/trainer/trainer_test.cc) and on the device
// through the stand-ins (tests/gpu_standin/device_trainer_test.cc). Header-only.
#ifndef DDPIO_TESTS_SUPPORT_TRAIN_RUNS_H_
#define DDPIO_TESTS_SUPPORT_TRAIN_RUNS_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/communicator_conformance.h"
#include "ddpio/trainer/trainer.h"
#include "gtest/gtest.h"

namespace ddpio::testing {

struct RankOut {
  uint64_t checksum = 0;
  double val_accuracy = -1;
  uint64_t val_samples = 0;
  uint64_t steps = 0;
  std::vector<float> params;
};

// Runs `world` ranks training with `o`; returns each rank's outcome (empty params on failure).
inline std::vector<RankOut> TrainJob(int world, const trainer::TrainOptions& o,
                                     const std::string& out, const std::string& name,
                                     comm::BackendKind backend = comm::BackendKind::kGloo) {
  comm::RendezvousOptions ro;
  ro.token = "train";
  ro.job_id = name;
  ro.backend = backend;
  const auto codes = comm::testing::RunJob(world, ro, [&](comm::Job& job) {
    auto r = trainer::Train(job, o);
    if (!r.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", job.info().rank, r.status().ToString().c_str());
      return 1;
    }
    std::ofstream f(absl::StrCat(out, "/", name, ".", job.info().rank), std::ios::binary);
    const uint64_t n = r->params.size();
    f.write(reinterpret_cast<const char*>(&r->param_checksum), 8);
    f.write(reinterpret_cast<const char*>(&r->val_accuracy), 8);
    f.write(reinterpret_cast<const char*>(&r->val_samples), 8);
    f.write(reinterpret_cast<const char*>(&r->steps), 8);
    f.write(reinterpret_cast<const char*>(&n), 8);
    f.write(reinterpret_cast<const char*>(r->params.data()), n * sizeof(float));
    return f.good() ? 0 : 2;
  });
  std::vector<RankOut> outs(world);
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(codes[r], 0) << name << " rank " << r;
    std::ifstream f(absl::StrCat(out, "/", name, ".", r), std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&outs[r].checksum), 8);
    f.read(reinterpret_cast<char*>(&outs[r].val_accuracy), 8);
    f.read(reinterpret_cast<char*>(&outs[r].val_samples), 8);
    f.read(reinterpret_cast<char*>(&outs[r].steps), 8);
    f.read(reinterpret_cast<char*>(&n), 8);
    outs[r].params.resize(f ? n : 0);
    f.read(reinterpret_cast<char*>(outs[r].params.data()), outs[r].params.size() * sizeof(float));
  }
  return outs;
}

// max |a - b| / max |b|.
inline double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size() || b.empty()) return 1e9;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_TRAIN_RUNS_H_
