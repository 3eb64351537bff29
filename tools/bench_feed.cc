#include "tools/bench_feed.h"

#include <chrono>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/pipeline/pipeline.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::tools {

using Clock = std::chrono::steady_clock;

absl::StatusOr<nlohmann::json> BenchFeed(const BenchFeedOptions& o) {
  DDPIO_ASSIGN_OR_RETURN(comm::RankInfo info, comm::DiscoverRank(comm::CurrentEnvironment()));
  // Arguments first, before the network: every rank fails the same way at once.
  PipelineOptions po;
  po.data = o.data;
  po.group_size = o.group_size;
  DDPIO_ASSIGN_OR_RETURN(po.layout, comm::ParseLayoutKind(o.layout));
  po.feeder = o.feeder;
  DDPIO_RETURN_IF_ERROR(Pipeline::Check(info, po));
  std::ofstream indices;
  if (!o.indices_out.empty()) {
    const std::string path = absl::StrCat(o.indices_out, ".rank", info.rank, ".txt");
    indices.open(path, std::ios::trunc);
    if (!indices) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  }
  comm::RendezvousOptions ro;
  ro.store = o.store;
  ro.advertise_addr = o.advertise_addr;
  DDPIO_ASSIGN_OR_RETURN(ro.backend, comm::ParseBackend(o.backend));  // nccl without a device: fails here
  ro.timeout = o.feeder.timeout;               // every wait honours --timeout
  ro.comm.gloo.timeout = o.feeder.timeout;
  DDPIO_ASSIGN_OR_RETURN(auto job, comm::Job::Join(info, ro));
  comm::LeaveGuard leave(*job);
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> feeder, Pipeline::Open(*job, po));
  const bool leader = feeder->is_leader();
  // Where the batches arrive: device memory when the group moves decoded batches over NCCL.
  const bool device = job->backend().kind == comm::BackendKind::kNccl &&
                      o.feeder.payload == broadcast::FeedPayload::kDecoded;
  if (info.rank == 0) {
    DDPIO_LOG(INFO) << "bench feed: " << job->backend().why << "; " << info.world_size << " ranks in groups of " << o.group_size << " ("
                    << o.layout << "), " << broadcast::FeedModeName(o.feeder.mode) << ", "
                    << broadcast::FeedPayloadName(o.feeder.payload) << " payload, "
                    << (o.feeder.readers == broadcast::FeedReaders::kAll ? "every rank reading" : "leaders reading")
                    << (o.feeder.mode == broadcast::FeedMode::kReplicate && o.feeder.readers == broadcast::FeedReaders::kLeader
                            ? absl::StrCat(" (", broadcast::FeedRelayName(o.feeder.relay), " relay)")
                            : std::string())
                    << ", " << feeder->dataset_size()
                    << " samples, " << o.epochs << " epoch(s)";
  }
  uint64_t valid = 0;
  const auto t0 = Clock::now();
  const auto wall0 = std::chrono::system_clock::now();  // ranks' spans line up across processes
  for (int e = 0; e < o.epochs; ++e) {
    DDPIO_RETURN_IF_ERROR(feeder->StartEpoch(e));
    for (;;) {
      absl::StatusOr<loader::Batch> b = feeder->Next();
      if (absl::IsOutOfRange(b.status())) break;
      DDPIO_RETURN_IF_ERROR(b.status());
      for (uint64_t k = 0; k < b->size; ++k) {
        valid += b->valid[k];
        if (indices.is_open()) indices << b->indices[k] << '\n';
      }
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto unix_s = [](std::chrono::system_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  const double start_unix = unix_s(wall0), end_unix = unix_s(std::chrono::system_clock::now());
  if (indices.is_open()) {
    indices.flush();
    if (!indices) return absl::ResourceExhaustedError(absl::StrCat("writing ", o.indices_out, ".rank", info.rank, ".txt failed"));
  }
  const broadcast::FeederCounters c = feeder->counters();
  feeder.reset();
  DDPIO_RETURN_IF_ERROR(job->world().Barrier(o.feeder.timeout));
  nlohmann::json j{{"rank", info.rank},
                   {"world", info.world_size},
                   {"group_size", o.group_size},
                   {"layout", o.layout},
                   {"mode", broadcast::FeedModeName(o.feeder.mode)},
                   {"payload", broadcast::FeedPayloadName(o.feeder.payload)},
                   {"readers", broadcast::FeedReadersName(o.feeder.readers)},
                   {"relay", broadcast::FeedRelayName(o.feeder.relay)},
                   {"leader", leader},
                   {"epochs", o.epochs},
                   {"images", c.images},
                   {"valid_images", valid},
                   {"batches", c.batches},
                   {"seconds", seconds},
                   {"start_unix_s", start_unix},  // the job's aggregate rate: all images / span
                   {"end_unix_s", end_unix},
                   {"images_per_s", c.images / seconds},
                   {"backend", comm::BackendName(job->backend().kind)},
                   {"path", device ? "gpu" : "cpu"}};
  j.update(FeederCountersJson(c));
  leave.Succeeded();
  return j;
}

nlohmann::json FeederCountersJson(const broadcast::FeederCounters& c) {
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& s : c.skipped) skipped.push_back({{"index", s.index}, {"reason", s.reason}});
  return nlohmann::json{{"records_read", c.records_read},         {"bytes_read", c.bytes_read},
                        {"bytes_sent", c.bytes_sent},             {"bytes_received", c.bytes_received},
                        {"network_wait_s", c.network_wait_ns / 1e9}, {"loader_wait_s", c.loader_wait_ns / 1e9},
                        {"bad_samples", c.bad_samples},           {"skipped", skipped}};
}

std::string SkippedText(const nlohmann::json& j) {
  if (!j.contains("bad_samples") || j["bad_samples"].get<uint64_t>() == 0) return "";
  std::string text = absl::StrFormat("  skipped %d bad sample(s)%s:\n", j["bad_samples"].get<uint64_t>(),
                                     j["bad_samples"].get<uint64_t>() > j["skipped"].size() ? ", the first" : "");
  for (const auto& s : j["skipped"]) absl::StrAppendFormat(&text, "    %s\n", s["reason"].get<std::string>());
  return text;
}

std::string BenchFeedText(const nlohmann::json& j) {
  return absl::StrFormat(
      "bench feed rank %d (%s, %s): %.0f images/s, %d images in %.2f s; read %d records (%.1f MB); sent %.1f MB, "
      "received %.1f MB; waited %.2f s on the network, %.2f s on the feeder\n",
      j["rank"].get<int>(), j["leader"].get<bool>() ? "leader" : "peer", j["path"].get<std::string>(), j["images_per_s"].get<double>(),
      j["images"].get<uint64_t>(), j["seconds"].get<double>(), j["records_read"].get<uint64_t>(),
      j["bytes_read"].get<uint64_t>() / 1e6, j["bytes_sent"].get<uint64_t>() / 1e6,
      j["bytes_received"].get<uint64_t>() / 1e6, j["network_wait_s"].get<double>(), j["loader_wait_s"].get<double>()) +
         SkippedText(j);
}

}  // namespace ddpio::tools
