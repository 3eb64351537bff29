#include "ddpio/comm/tcp.h"

#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/internal/socket.h"
#include "ddpio/comm/tcp_store.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {
namespace {

using Clock = std::chrono::steady_clock;
using internal::Fd;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

absl::StatusOr<int> FreeTcpPort(const std::string& address) {
  int port = 0;
  DDPIO_ASSIGN_OR_RETURN(Fd probe, internal::Listen(address, 0, &port));
  return port;
}

// Plain TCP between ranks 0 (sender) and 1 (receiver): `size` bytes then a 1-byte ack, median.
absl::StatusOr<double> TcpCeilingGbPerS(Job& job, uint64_t size, int repeat) {
  const int rank = job.info().rank;
  if (rank > 1 || job.info().world_size < 2) return 0.0;
  const auto deadline = [] { return Clock::now() + std::chrono::seconds(120); };
  std::vector<uint8_t> buf(std::min<uint64_t>(size, 4 << 20), 1);
  if (rank == 1) {
    int port = 0;
    const std::string& address =
        job.advertise().address;  // reachable from rank 0, wherever it runs
    DDPIO_ASSIGN_OR_RETURN(Fd listener, internal::Listen(address, 0, &port));
    // Only rank 0 may feed this socket: it proves itself with a nonce it read from the
    // (authenticated) store; anyone else who connects first is turned away.
    const std::string nonce = comm::RandomToken(16);
    DDPIO_RETURN_IF_ERROR(job.store()->Set("bench/tcp-nonce", nonce));
    DDPIO_RETURN_IF_ERROR(job.store()->Set("bench/tcp-port", std::to_string(port)));
    DDPIO_RETURN_IF_ERROR(job.store()->Set("bench/tcp-addr", address));
    Fd conn;
    for (const auto until = deadline(); !conn.valid();) {
      if (Clock::now() > until)
        return absl::DeadlineExceededError("rank 0 never connected for the TCP ceiling");
      int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return absl::UnavailableError("accept failed");
      Fd candidate(fd);
      auto hello = internal::ReadFrame(candidate.get(), 64, Clock::now() + std::chrono::seconds(5));
      if (hello.ok() && *hello == nonce) conn = std::move(candidate);
    }
    for (int r = 0; r < repeat; ++r) {
      for (uint64_t got = 0; got < size;) {
        uint64_t n = std::min<uint64_t>(buf.size(), size - got);
        DDPIO_RETURN_IF_ERROR(internal::ReadFull(conn.get(), buf.data(), n, deadline()));
        got += n;
      }
      uint8_t ack = 1;
      DDPIO_RETURN_IF_ERROR(internal::WriteAll(conn.get(), &ack, 1, deadline()));
    }
    return 0.0;
  }
  DDPIO_ASSIGN_OR_RETURN(std::string port,
                         job.store()->Get("bench/tcp-port", std::chrono::seconds(60)));
  DDPIO_ASSIGN_OR_RETURN(std::string address,
                         job.store()->Get("bench/tcp-addr", std::chrono::seconds(60)));
  DDPIO_ASSIGN_OR_RETURN(std::string nonce,
                         job.store()->Get("bench/tcp-nonce", std::chrono::seconds(60)));
  DDPIO_ASSIGN_OR_RETURN(Fd conn, internal::Connect(address, std::stoi(port), deadline()));
  DDPIO_RETURN_IF_ERROR(internal::WriteFrame(conn.get(), nonce, deadline()));
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = Clock::now();
    for (uint64_t sent = 0; sent < size;) {
      uint64_t n = std::min<uint64_t>(buf.size(), size - sent);
      DDPIO_RETURN_IF_ERROR(internal::WriteAll(conn.get(), buf.data(), n, deadline()));
      sent += n;
    }
    uint8_t ack = 0;
    DDPIO_RETURN_IF_ERROR(internal::ReadFull(conn.get(), &ack, 1, deadline()));
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return size / Median(t) / 1e9;
}

}  // namespace ddpio::comm
