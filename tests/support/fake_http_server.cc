#include "tests/support/fake_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace ddpio::testing {

FakeHttpServer::FakeHttpServer(std::vector<FakeAnswer> answers) : answers_(std::move(answers)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  ::listen(listen_fd_, 64);
  thread_ = std::thread([this] { Serve(); });
}

FakeHttpServer::~FakeHttpServer() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::vector<FakeRequest> FakeHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FakeHttpServer::Serve() {
  std::vector<int> open;
  while (!stop_) {
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    for (int fd : open) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    std::vector<int> keep;
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        // A trickle's bytes leave as they are sent, not when the previous ones are acknowledged.
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        keep.push_back(fd);  // polled from the next turn
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        keep.push_back(fds[i].fd);
        continue;
      }
      if (Handle(fds[i].fd)) {
        keep.push_back(fds[i].fd);
      } else {
        ::close(fds[i].fd);
      }
    }
    open = std::move(keep);
  }
  for (int fd : open) ::close(fd);
  for (int fd : hung_) ::close(fd);
}

// Reads one request from `fd` and answers it; false when the connection is to be dropped (or
// is kept hanging, moved to hung_).
bool FakeHttpServer::Handle(int fd) {
  std::string in;
  char buf[65536];
  size_t header_end = std::string::npos;
  while (header_end == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in.append(buf, static_cast<size_t>(n));
    header_end = in.find("\r\n\r\n");
  }
  size_t content_length = 0;
  const std::string lower = [&] {
    std::string l = in.substr(0, header_end);
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l;
  }();
  if (size_t at = lower.find("content-length:"); at != std::string::npos) {
    content_length = std::strtoull(lower.c_str() + at + 15, nullptr, 10);
  }
  while (in.size() < header_end + 4 + content_length) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in.append(buf, static_cast<size_t>(n));
  }
  FakeRequest r;
  const size_t sp1 = in.find(' '), sp2 = in.find(' ', sp1 + 1);
  r.method = in.substr(0, sp1);
  r.target = in.substr(sp1 + 1, sp2 - sp1 - 1);
  r.headers = in.substr(0, header_end);
  size_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = requests_.size();
    requests_.push_back(r);
  }
  const FakeAnswer& a = answers_[std::min(index, answers_.size() - 1)];
  if (a.hang) {
    hung_.push_back(::dup(fd));
    return false;
  }
  if (a.close) return false;
  const bool head = r.method == "HEAD";
  const bool plain =
      a.content_length < 0 && !a.no_content_length && a.filler_bytes == 0 && a.bytes_per_s == 0;
  std::string reply = "HTTP/1.1 " + std::to_string(a.status) + " X\r\n";
  if (!a.no_content_length) {
    const uint64_t length = a.content_length >= 0 ? static_cast<uint64_t>(a.content_length)
                            : head                ? 0
                                                  : a.body.size() + a.filler_bytes;
    reply += "Content-Length: " + std::to_string(length) + "\r\n";
  }
  reply += "ETag: \"e" + std::to_string(index) + "\"\r\n" + a.headers + "\r\n";
  // In one piece when it can be: a head and a body sent apart would wait on the client's delayed
  // ACK (Nagle).
  const bool streamed = a.filler_bytes > 0 || a.bytes_per_s > 0;
  if (!head && !streamed) reply += a.body;
  if (!Send(fd, reply.data(), reply.size())) return false;
  if (!head && streamed && !SendBody(fd, a)) return false;
  return plain;
}

bool FakeHttpServer::Send(int fd, const char* data, size_t size) {
  size_t sent = 0;
  while (sent < size) {
    if (stop_) return false;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool FakeHttpServer::SendBody(int fd, const FakeAnswer& a) {
  const uint64_t total = a.body.size() + a.filler_bytes;
  // A trickle goes out in tenths of a second's worth (at least a byte), paced; the rest in 64 KiB
  // pieces as fast as the client reads.
  const uint64_t piece = a.bytes_per_s > 0 ? std::max<uint64_t>(1, a.bytes_per_s / 10) : 65536;
  const auto pause = std::chrono::milliseconds(
      a.bytes_per_s > 0 ? static_cast<int64_t>(piece * 1000 / a.bytes_per_s) : 0);
  std::string chunk;
  for (uint64_t at = 0; at < total; at += chunk.size()) {
    const uint64_t n = std::min(piece, total - at);
    chunk.clear();
    if (at < a.body.size()) chunk = a.body.substr(at, std::min<uint64_t>(n, a.body.size() - at));
    chunk.resize(n, 'z');
    if (!Send(fd, chunk.data(), chunk.size())) return false;
    // Paced: wait out the pause, unless the client leaves (its close reads as input) or the
    // server stops.
    for (auto until = std::chrono::steady_clock::now() + pause;
         std::chrono::steady_clock::now() < until;) {
      if (stop_) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 1, 100))) > 0) {
        char c;
        if (::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return false;
      }
    }
  }
  return true;
}

}  // namespace ddpio::testing
