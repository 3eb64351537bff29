// What the group feeder's multi-rank tests check, shared by the tests over Gloo
// (ddpio/broadcast/group_feeder_test.cc) and over NCCL through the stand-in
// (tests/gpu_standin/nccl_feeder_test.cc). Header-only: each test links the feeder itself.
#ifndef DDPIO_TESTS_SUPPORT_FEEDER_CHECKS_H_
#define DDPIO_TESTS_SUPPORT_FEEDER_CHECKS_H_

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/broadcast/group_feeder.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::testing {

constexpr int kFeedWorld = 4;  // ranks of every multi-rank feeder test

// One feeder test's job: the dataset, where each rank writes its report, the groups, the options.
struct FeedSetup {
  std::string data;
  std::string out;  // directory for each rank's report
  int group_size = 2;
  comm::LayoutKind layout = comm::LayoutKind::kContiguous;
  broadcast::FeederOptions options;
  int epochs = 2;
};

// Joins the group feeder of `s` with `options` as this job's rank (the dataset, opened by the
// ranks that read, is kept in `*reader`).
inline absl::StatusOr<std::unique_ptr<broadcast::GroupFeeder>> JoinFeeder(
    comm::Job& job, const FeedSetup& s, const broadcast::FeederOptions& options,
    std::unique_ptr<storage::DatasetReader>* reader) {
  const int rank = job.info().rank;
  DDPIO_ASSIGN_OR_RETURN(auto layout, comm::GroupLayout::Make(kFeedWorld, s.group_size, s.layout));
  DDPIO_ASSIGN_OR_RETURN(auto group, job.Group(layout));
  if (layout.is_leader(rank) || options.readers == broadcast::FeedReaders::kAll) {
    DDPIO_ASSIGN_OR_RETURN(*reader, storage::DatasetReader::Open(s.data, {}));
  }
  return broadcast::GroupFeeder::Create(reader->get(), layout, rank, std::move(group), options);
}

// One line per sample: epoch, index, label, validity and the FNV-1a of its pixels, read from
// wherever the feeder put them (Batch::data, or Batch::device_data: host memory under the
// stand-in).
inline std::string DescribeBatch(const loader::Batch& b, size_t sample_bytes) {
  const auto* pixels = static_cast<const uint8_t*>(b.data != nullptr ? b.data : b.device_data);
  std::string s;
  for (uint64_t k = 0; k < b.size; ++k) {
    absl::StrAppend(&s, b.epoch, " ", b.indices[k], " ", b.labels[k], " ", int{b.valid[k]}, " ",
                    Fnv1a64Bytes(pixels + k * sample_bytes, sample_bytes), "\n");
  }
  return s;
}

inline std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A rank of the dead-peer test: feeds up to five epochs; rank `victim` dies holding its second
// batch. Every other rank exits 0 when it gets Unavailable within `within` — or, when
// `deadline_within` is not zero, DeadlineExceeded within that (the backend's timeout ran out
// first: a transport that cannot see the peer go, as NCCL's may not, still ends every wait at the
// timeout with a clear error) —, 12 for another error or a later one, 13 when it never noticed,
// 14 when a new epoch is then not refused (a group that lost a member cannot run again). Exits
// at once either way (the victim will never say goodbye to the job).
[[noreturn]] inline void FeedUntilAPeerDies(
    broadcast::GroupFeeder& feeder, int rank, int victim, std::chrono::seconds within,
    std::chrono::seconds deadline_within = std::chrono::seconds(0)) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int e = 0; e < 5; ++e) {
    if (!feeder.StartEpoch(e).ok()) break;
    for (int n = 0;; ++n) {
      auto b = feeder.Next();
      if (rank == victim && n == 1) std::_Exit(42);  // dies holding a batch, mid-epoch
      if (absl::IsOutOfRange(b.status())) break;
      if (!b.ok()) {
        const auto took = std::chrono::steady_clock::now() - t0;
        std::fprintf(stderr, "rank %d: %s\n", rank, b.status().ToString().c_str());
        const bool unavailable = absl::IsUnavailable(b.status()) && took < within;
        const bool timed_out = absl::IsDeadlineExceeded(b.status()) && took < deadline_within;
        if (!unavailable && !timed_out) std::_Exit(12);
        const absl::Status again = feeder.StartEpoch(e + 1);
        const bool refused = absl::IsFailedPrecondition(again) &&
                             again.message().find("make a new loader") != absl::string_view::npos;
        std::_Exit(refused ? 0 : 14);
      }
    }
  }
  std::_Exit(13);
}

// Feeds epoch 0 until an error: 0 when it is DataLoss naming `key`, 10 when the whole epoch came
// through, 11 for any other error, 4 when the epoch does not start.
inline int ExpectDataLossNaming(broadcast::GroupFeeder& feeder, int rank, const std::string& key) {
  if (!feeder.StartEpoch(0).ok()) return 4;
  for (;;) {
    auto b = feeder.Next();
    if (b.ok()) continue;
    if (absl::IsOutOfRange(b.status())) return 10;
    std::fprintf(stderr, "rank %d: %s\n", rank, b.status().ToString().c_str());
    const bool names = b.status().message().find(key) != absl::string_view::npos;
    return absl::IsDataLoss(b.status()) && names ? 0 : 11;
  }
}

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_FEEDER_CHECKS_H_
