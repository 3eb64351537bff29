// Blocking TCP helpers for the store: every read and write has a deadline, every failure is a
// Status (peer gone -> Unavailable, deadline -> DeadlineExceeded). Private to comm/.
#ifndef DDPIO_COMM_INTERNAL_SOCKET_H_
#define DDPIO_COMM_INTERNAL_SOCKET_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/common/fd.h"

namespace ddpio::comm::internal {

using Clock = std::chrono::steady_clock;

using Fd = ::ddpio::Fd;

// Listens on addr:port (port 0: any free port). Returns the socket; *bound_port gets the port.
absl::StatusOr<Fd> Listen(const std::string& addr, int port, int* bound_port);
// Connects once (no retry). Unavailable when refused or unreachable.
absl::StatusOr<Fd> Connect(const std::string& host, int port, Clock::time_point deadline);
// Connects, retrying refused connections with jittered exponential backoff (10 ms to 500 ms;
// the server may start later) until `timeout`; then DeadlineExceeded "no <what> at host:port
// within N ms (last error)".
absl::StatusOr<Fd> ConnectRetrying(const std::string& host, int port,
                                   std::chrono::milliseconds timeout, const std::string& what);

absl::Status WriteAll(int fd, const void* data, size_t size, Clock::time_point deadline);
absl::Status ReadFull(int fd, void* data, size_t size, Clock::time_point deadline);

// Gloo writes to its sockets with write(2): a peer that died would end this process with
// SIGPIPE. Sets SIGPIPE to "ignore" when it is at its default (as Python, hence PyTorch, does),
// so the write fails with EPIPE and becomes a Status instead. A handler the program installed is
// left alone. Idempotent.
void IgnoreSigpipe();

// Frames: a 4-byte little-endian length, then the body. ReadFrame rejects a body longer than
// max_size with InvalidArgument (and reads nothing more).
absl::Status WriteFrame(int fd, const std::string& body, Clock::time_point deadline);
absl::StatusOr<std::string> ReadFrame(int fd, size_t max_size, Clock::time_point deadline);

}  // namespace ddpio::comm::internal

#endif  // DDPIO_COMM_INTERNAL_SOCKET_H_
