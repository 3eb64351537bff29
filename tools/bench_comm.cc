#include "tools/bench_comm.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "broadcast/internal/socket.h"
#include "broadcast/rendezvous.h"
#include "broadcast/tcp_store.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace ddpio::tools {
namespace {

using Clock = std::chrono::steady_clock;
using broadcast::internal::Fd;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

template <typename Fn>
absl::StatusOr<double> MedianSeconds(broadcast::Communicator& c, int repeat, Fn op) {
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    DDPIO_RETURN_IF_ERROR(c.Barrier(std::chrono::seconds(120)));
    auto t0 = Clock::now();
    DDPIO_RETURN_IF_ERROR(op());
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return Median(t);
}

// Plain TCP between ranks 0 (sender) and 1 (receiver): `size` bytes then a 1-byte ack, median.
absl::StatusOr<double> TcpCeiling(broadcast::Job& job, uint64_t size, int repeat) {
  const int rank = job.info().rank;
  const auto deadline = [] { return Clock::now() + std::chrono::seconds(120); };
  std::vector<uint8_t> buf(std::min<uint64_t>(size, 4 << 20), 1);
  if (rank == 1) {
    int port = 0;
    const std::string& address = job.advertise().address;  // reachable from rank 0, wherever it runs
    DDPIO_ASSIGN_OR_RETURN(Fd listener, broadcast::internal::Listen(address, 0, &port));
    // Only rank 0 may feed this socket: it proves itself with a nonce it read from the
    // (authenticated) store; anyone else who connects first is turned away.
    const std::string nonce = broadcast::RandomToken(16);
    DDPIO_RETURN_IF_ERROR(job.store()->Set("bench/tcp-nonce", nonce));
    DDPIO_RETURN_IF_ERROR(job.store()->Set("bench/tcp-port", std::to_string(port)));
    DDPIO_RETURN_IF_ERROR(job.store()->Set("bench/tcp-addr", address));
    Fd conn;
    for (const auto until = deadline(); !conn.valid();) {
      if (Clock::now() > until) return absl::DeadlineExceededError("rank 0 never connected for the TCP ceiling");
      int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return absl::UnavailableError("accept failed");
      Fd candidate(fd);
      auto hello = broadcast::internal::ReadFrame(candidate.get(), 64, Clock::now() + std::chrono::seconds(5));
      if (hello.ok() && *hello == nonce) conn = std::move(candidate);
    }
    for (int r = 0; r < repeat; ++r) {
      for (uint64_t got = 0; got < size;) {
        uint64_t n = std::min<uint64_t>(buf.size(), size - got);
        DDPIO_RETURN_IF_ERROR(broadcast::internal::ReadFull(conn.get(), buf.data(), n, deadline()));
        got += n;
      }
      uint8_t ack = 1;
      DDPIO_RETURN_IF_ERROR(broadcast::internal::WriteAll(conn.get(), &ack, 1, deadline()));
    }
    return 0.0;
  }
  DDPIO_ASSIGN_OR_RETURN(std::string port, job.store()->Get("bench/tcp-port", std::chrono::seconds(60)));
  DDPIO_ASSIGN_OR_RETURN(std::string address, job.store()->Get("bench/tcp-addr", std::chrono::seconds(60)));
  DDPIO_ASSIGN_OR_RETURN(std::string nonce, job.store()->Get("bench/tcp-nonce", std::chrono::seconds(60)));
  DDPIO_ASSIGN_OR_RETURN(Fd conn, broadcast::internal::Connect(address, std::stoi(port), deadline()));
  DDPIO_RETURN_IF_ERROR(broadcast::internal::WriteFrame(conn.get(), nonce, deadline()));
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = Clock::now();
    for (uint64_t sent = 0; sent < size;) {
      uint64_t n = std::min<uint64_t>(buf.size(), size - sent);
      DDPIO_RETURN_IF_ERROR(broadcast::internal::WriteAll(conn.get(), buf.data(), n, deadline()));
      sent += n;
    }
    uint8_t ack = 0;
    DDPIO_RETURN_IF_ERROR(broadcast::internal::ReadFull(conn.get(), &ack, 1, deadline()));
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return size / Median(t) / 1e9;
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchComm(const BenchCommOptions& o) {
  DDPIO_ASSIGN_OR_RETURN(broadcast::BackendKind backend, broadcast::ParseBackend(o.backend));
  DDPIO_ASSIGN_OR_RETURN(broadcast::RankInfo info, broadcast::DiscoverRank(broadcast::CurrentEnvironment()));
  // Check the arguments before touching the network: every rank then fails the same way at
  // once, instead of one rank leaving while the others are still connecting.
  const int g = o.group_size > 0 ? o.group_size : info.world_size;
  DDPIO_ASSIGN_OR_RETURN(auto kind, sampler::ParseLayoutKind(o.layout));
  DDPIO_ASSIGN_OR_RETURN(auto layout, sampler::GroupLayout::Make(info.world_size, g, kind));
  broadcast::RendezvousOptions ro;
  ro.store = o.store;
  ro.advertise_addr = o.advertise_addr;
  ro.backend = backend;
  DDPIO_ASSIGN_OR_RETURN(auto job, broadcast::Job::Join(info, ro));
  broadcast::LeaveGuard leave(*job);
  broadcast::Communicator* comm = &job->world();
  std::unique_ptr<broadcast::Communicator> group;
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
  DDPIO_ASSIGN_OR_RETURN(double bcast, MedianSeconds(*comm, o.repeat, [&] { return comm->Broadcast(bytes, size, 0, t); }));
  const uint64_t part = size / comm->size();
  std::vector<const void*> parts;
  for (int i = 0; i < comm->size(); ++i) parts.push_back(bytes + i * part);
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> mine, comm->Allocate(part));
  DDPIO_ASSIGN_OR_RETURN(double scatter, MedianSeconds(*comm, o.repeat, [&] {
    return comm->Scatter(comm->rank() == 0 ? parts : std::vector<const void*>{}, mine.get(), part, 0, t);
  }));
  DDPIO_ASSIGN_OR_RETURN(double allreduce, MedianSeconds(*comm, o.repeat, [&] {
    return comm->AllReduce(data, size / sizeof(float), broadcast::ReduceOp::kSum, t);
  }));
  float* small = reinterpret_cast<float*>(small_buffer.get());
  if (!comm->device_memory()) *small = 1.0f;
  DDPIO_ASSIGN_OR_RETURN(double latency, MedianSeconds(*comm, std::max(o.repeat, 21), [&] {
    return comm->AllReduce(small, 1, broadcast::ReduceOp::kSum, t);
  }));
  double ceiling = 0;
  if (info.world_size >= 2 && info.rank <= 1) {
    DDPIO_ASSIGN_OR_RETURN(ceiling, TcpCeiling(*job, size, o.repeat));
  }
  DDPIO_RETURN_IF_ERROR(job->world().Barrier(t));
  leave.Succeeded();
  if (info.rank != 0) return nlohmann::json::object();
  const int n = comm->size();
  nlohmann::json j = {{"rank", info.rank},
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
                      {"ceiling_tcp_gb_per_s", info.world_size >= 2 ? nlohmann::json(ceiling) : nlohmann::json(nullptr)},
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
