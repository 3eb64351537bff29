#include "tools/bench_comm.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/comm/tcp.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "tools/bench_ceiling.h"  // Median

namespace ddpio::tools {
namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
absl::StatusOr<double> MedianSeconds(comm::Communicator& c, int repeat, Fn op) {
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    DDPIO_RETURN_IF_ERROR(c.Barrier(std::chrono::seconds(120)));
    auto t0 = Clock::now();
    DDPIO_RETURN_IF_ERROR(op());
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return Median(t);
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchComm(const BenchCommOptions& o) {
  DDPIO_ASSIGN_OR_RETURN(comm::BackendKind backend, comm::ParseBackend(o.backend));
  DDPIO_ASSIGN_OR_RETURN(comm::RankInfo info, comm::DiscoverRank(comm::CurrentEnvironment()));
  // Check the arguments before touching the network: every rank then fails the same way at
  // once, instead of one rank leaving while the others are still connecting.
  const int g = o.group_size > 0 ? o.group_size : info.world_size;
  DDPIO_ASSIGN_OR_RETURN(auto kind, comm::ParseLayoutKind(o.layout));
  DDPIO_ASSIGN_OR_RETURN(auto layout, comm::GroupLayout::Make(info.world_size, g, kind));
  comm::RendezvousOptions ro;
  ro.store = o.store;
  ro.advertise_addr = o.advertise_addr;
  ro.backend = backend;
  SetLogRank(info.rank);
  DDPIO_ASSIGN_OR_RETURN(auto job, comm::Job::Join(info, ro));
  comm::LeaveGuard leave(*job);
  comm::Communicator* comm = &job->world();
  std::unique_ptr<comm::Communicator> group;
  if (g != info.world_size) {
    DDPIO_ASSIGN_OR_RETURN(group, job->Group(layout));
    comm = group.get();
  }
  if (info.rank == 0) DDPIO_LOG(INFO) << "bench comm: backend " << job->backend().why;
  // Buffers of the backend's kind (device memory for NCCL), contents irrelevant to the timing.
  const uint64_t size = o.size / sizeof(float) * sizeof(float);
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buffer, comm->Allocate(size));
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> small_buffer, comm->Allocate(sizeof(float)));
  uint8_t* bytes = buffer.get();
  float* data = reinterpret_cast<float*>(buffer.get());
  if (!comm->device_memory()) std::fill(data, data + size / sizeof(float), 1.0f);
  const auto t = std::chrono::seconds(120);
  DDPIO_ASSIGN_OR_RETURN(double bcast, MedianSeconds(*comm, o.repeat, [&] {
                           return comm->Broadcast(bytes, size, 0, t);
                         }));
  const uint64_t part = size / comm->size();
  std::vector<const void*> parts;
  for (int i = 0; i < comm->size(); ++i) parts.push_back(bytes + i * part);
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> mine, comm->Allocate(part));
  DDPIO_ASSIGN_OR_RETURN(double scatter, MedianSeconds(*comm, o.repeat, [&] {
                           return comm->Scatter(
                               comm->rank() == 0 ? parts : std::vector<const void*>{}, mine.get(),
                               part, 0, t);
                         }));
  DDPIO_ASSIGN_OR_RETURN(double allreduce, MedianSeconds(*comm, o.repeat, [&] {
                           return comm->AllReduce(data, size / sizeof(float), comm::ReduceOp::kSum,
                                                  t);
                         }));
  float* small = reinterpret_cast<float*>(small_buffer.get());
  if (!comm->device_memory()) *small = 1.0f;
  DDPIO_ASSIGN_OR_RETURN(double latency, MedianSeconds(*comm, std::max(o.repeat, 21), [&] {
                           return comm->AllReduce(small, 1, comm::ReduceOp::kSum, t);
                         }));
  double ceiling = 0;
  if (info.world_size >= 2 && info.rank <= 1) {
    DDPIO_ASSIGN_OR_RETURN(ceiling, comm::TcpCeilingGbPerS(*job, size, o.repeat));
  }
  DDPIO_RETURN_IF_ERROR(job->world().Barrier(t));
  leave.Succeeded();
  if (info.rank != 0) return nlohmann::json::object();
  const int n = comm->size();
  nlohmann::json j = {
      {"rank", info.rank},
      {"world", info.world_size},
      {"backend", comm->backend()},
      {"group_size", g},
      {"layout", g == info.world_size ? "world" : o.layout},
      {"size", size},
      {"repeat", o.repeat},
      {"broadcast_gb_per_s", size / bcast / 1e9},
      // Bytes that cross the network: the root's own part is a local copy.
      {"scatter_gb_per_s", static_cast<double>(part) * (n - 1) / scatter / 1e9},
      {"allreduce_gb_per_s", size / allreduce / 1e9},
      {"allreduce_bus_gb_per_s", n > 1 ? size / allreduce / 1e9 * 2.0 * (n - 1) / n : 0.0},
      {"allreduce_latency_us", latency * 1e6},
      {"ceiling_tcp_gb_per_s",
       info.world_size >= 2 ? nlohmann::json(ceiling) : nlohmann::json(nullptr)},
      {"path", comm->device_memory() ? "gpu" : "cpu"}};
  return j;
}

std::string BenchCommText(const nlohmann::json& j) {
  if (j.empty()) return "";
  std::string ceiling = j["ceiling_tcp_gb_per_s"].is_null()
                            ? "n/a (one rank)"
                            : absl::StrFormat("%.2f GB/s", j["ceiling_tcp_gb_per_s"].get<double>());
  return absl::StrFormat(
      "bench comm: %s, world %d, group %d (%s), %d MiB, median of %d\n"
      "  broadcast     %6.2f GB/s  (bytes / time, per receiver)\n"
      "  scatter       %6.2f GB/s  (bytes sent to the other ranks / time)\n"
      "  all-reduce    %6.2f GB/s  algorithm, %.2f GB/s bus\n"
      "  latency       %6.0f us    (8-byte all-reduce)\n"
      "  ceiling       %s plain TCP between ranks 0 and 1, same run\n",
      j["backend"].get<std::string>(), j["world"].get<int>(), j["group_size"].get<int>(),
      j["layout"].get<std::string>(), j["size"].get<uint64_t>() >> 20, j["repeat"].get<int>(),
      j["broadcast_gb_per_s"].get<double>(), j["scatter_gb_per_s"].get<double>(),
      j["allreduce_gb_per_s"].get<double>(), j["allreduce_bus_gb_per_s"].get<double>(),
      j["allreduce_latency_us"].get<double>(), ceiling);
}

}  // namespace ddpio::tools
