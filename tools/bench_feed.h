// `ddpio bench feed` (run under `ddpio launch`, torchrun, srun or mpirun): the group feeder end to
// end. Every rank joins the job, builds its group, feeds --epochs epochs and prints its own
// result: images/s taken by its consumer, records and bytes it read from storage, bytes it sent
// and received, and the time its threads waited on the network and its consumer on the feeder.
// group_size 1 is every rank reading for itself: the baseline the other figures compare to.
// Groups do not talk to each other while they feed, so with more than one group a world
// heartbeat (every min(1 s, --timeout / 4), on a Gloo mesh of its own) ends the job on every
// rank within --timeout when a rank is lost anywhere, naming it and its group — as `train`'s
// per-step gradient all-reduce does — and its last beat is the job's final barrier.
// Ceiling: before each epoch and after the last, every rank of the job decodes the first
// --ceiling-images records of its dataset with tjDecompress2 (full decode) at once — each rank with
// as many decoders as its loaders have workers (a member sent decoded batches: none), the ranks
// meeting at a barrier over the world before and after each round — so the ceiling is measured
// as the epochs run: all the job's decoders sharing the machine's cores. Each rank reports its
// ceiling (median of the rounds) and each epoch's images/s against the ceilings around it; the
// sum of the ranks' ceilings is what the machine decodes with the job's threads
// (scripts/bench-feed.sh compares the job's images/s with it). Epoch times leave the rounds out.
#ifndef DDPIO_TOOLS_BENCH_FEED_H_
#define DDPIO_TOOLS_BENCH_FEED_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/feeder_options.h"
#include "ddpio/pipeline/pipeline_options.h"

namespace ddpio::tools {

struct BenchFeedOptions {
  // The dataset and how it is fed: group, mode, payload, loader settings; its timeout bounds
  // every wait of the job.
  PipelineOptions pipeline;
  std::string backend = "gloo";  // gloo, nccl or auto (comm/backend.h)
  int epochs = 1;
  // Records (the first N of the dataset) each ceiling round decodes, as `bench loader`'s; 0: no
  // ceiling (no rounds and no barriers between epochs).
  uint64_t ceiling_images = 400;
  std::string indices_out;     // PREFIX: PREFIX.rank<r>.txt gets every index received, in order
  std::string store;           // "" (TCP on rank 0) or "file:DIR"
  std::string advertise_addr;  // "" chooses (comm/advertise.h)
};

// A rank's feeder counters as JSON fields: records_read, bytes_read, bytes_sent,
// bytes_received, network_wait_s, loader_wait_s (shared by `bench feed` and `train`).
nlohmann::json FeederCountersJson(const broadcast::FeederCounters& c);
// "  skipped N bad sample(s):" and one line each, from FeederCountersJson's fields; "" for none.
std::string SkippedText(const nlohmann::json& j);

// This rank's result: images/s, what it moved, its ceiling (ceiling_images_per_s, the rounds,
// ceiling_threads) and ratio (null for a rank that decodes nothing). InvalidArgument for fewer
// than one epoch; a lost rank's error naming it (within --timeout); the job's and feeder's errors.
absl::StatusOr<nlohmann::json> BenchFeed(const BenchFeedOptions& options);
std::string BenchFeedText(const nlohmann::json& result);

}  // namespace ddpio::tools

#endif  // DDPIO_TOOLS_BENCH_FEED_H_
