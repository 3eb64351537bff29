#include "ddpio/comm/internal/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm::internal {

namespace {

// Waits until fd is ready for `events` or the deadline passes.
absl::Status WaitReady(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return absl::DeadlineExceededError("timed out waiting on the socket");
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "poll");
    if (n > 0) return absl::OkStatus();
  }
}

absl::StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  return res;
}

}  // namespace

absl::StatusOr<Fd> Listen(const std::string& addr, int port, int* bound_port) {
  DDPIO_ASSIGN_OR_RETURN(addrinfo * res, Resolve(addr, port, true));
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", addr));
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) continue;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), 1024) != 0) {
      last = ErrnoToStatus(errno, absl::StrCat("listening on ", addr, ":", port));
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    *bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    ::freeaddrinfo(res);
    return fd;
  }
  ::freeaddrinfo(res);
  return last;
}

absl::StatusOr<Fd> ConnectRetrying(const std::string& host, int port,
                                   std::chrono::milliseconds timeout, const std::string& what) {
  const auto deadline = Clock::now() + timeout;
  std::minstd_rand jitter(std::random_device{}());
  auto pause = std::chrono::milliseconds(10);
  for (;;) {
    auto fd = Connect(host, port, deadline);
    if (fd.ok()) return fd;
    // The server is not listening yet: retry with backoff, each pause drawn from its upper half
    // so that ranks started together do not knock together.
    const auto sleep = pause / 2 + std::chrono::milliseconds(jitter() % (pause.count() / 2 + 1));
    if (Clock::now() + sleep >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("no ", what, " at ", host, ":", port,
                                                      " within ", timeout.count(), " ms (",
                                                      fd.status().message(), ")"));
    }
    std::this_thread::sleep_for(sleep);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

absl::StatusOr<Fd> Connect(const std::string& host, int port, Clock::time_point deadline) {
  DDPIO_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host, port, false));
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", host));
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) continue;
    int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      absl::Status ready = WaitReady(fd.get(), POLLOUT, deadline);
      if (!ready.ok()) {
        last = ready;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last = absl::UnavailableError(
          absl::StrCat("connecting to ", host, ":", port, ": ", std::strerror(errno)));
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::freeaddrinfo(res);
    return fd;
  }
  ::freeaddrinfo(res);
  return last;
}

absl::Status WriteAll(int fd, const void* data, size_t size, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      DDPIO_RETURN_IF_ERROR(WaitReady(fd, POLLOUT, deadline));
      continue;
    }
    return absl::UnavailableError(absl::StrCat("peer gone while sending: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ReadFull(int fd, void* data, size_t size, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::UnavailableError("peer closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      DDPIO_RETURN_IF_ERROR(WaitReady(fd, POLLIN, deadline));
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("peer gone while receiving: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status WriteFrame(int fd, const std::string& body, Clock::time_point deadline) {
  uint8_t len[4];
  EncodeFixed32(len, static_cast<uint32_t>(body.size()));
  DDPIO_RETURN_IF_ERROR(WriteAll(fd, len, 4, deadline));
  return WriteAll(fd, body.data(), body.size(), deadline);
}

absl::StatusOr<std::string> ReadFrame(int fd, size_t max_size, Clock::time_point deadline) {
  uint8_t len[4];
  DDPIO_RETURN_IF_ERROR(ReadFull(fd, len, 4, deadline));
  const size_t size = DecodeFixed32(len);
  if (size > max_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("message of ", size, " bytes exceeds the limit of ", max_size));
  }
  // Grow with the bytes that arrive, never with the declared length: a peer that announces a
  // large frame and sends nothing costs nothing.
  constexpr size_t kStep = size_t{1} << 20;
  std::string body;
  while (body.size() < size) {
    const size_t have = body.size(), n = std::min(kStep, size - have);
    body.resize(have + n);
    DDPIO_RETURN_IF_ERROR(ReadFull(fd, body.data() + have, n, deadline));
  }
  return body;
}

}  // namespace ddpio::comm::internal

namespace ddpio::comm::internal {

void IgnoreSigpipe() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace ddpio::comm::internal
