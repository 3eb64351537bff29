// TcpStoreServer: one thread, one epoll loop, every connection a small state machine
// (tcp_store.h says what it bounds and why).
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/internal/socket.h"
#include "ddpio/comm/internal/store_wire.h"
#include "ddpio/comm/tcp_store.h"
#include "ddpio/common/coding.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {

using internal::Clock;
using namespace internal;  // the wire format's tags and helpers

struct TcpStoreServer::Conn {
  int fd = -1;
  uint64_t seq = 0;  // order of acceptance
  bool authed = false;
  Clock::time_point accepted_at;     // hello_grace counts from here
  Clock::time_point hello_deadline;  // unauthenticated only
  std::string in;                    // bytes received, not yet processed
  std::string out;                   // bytes to send
  size_t out_pos = 0;
  bool close_after_flush = false;  // an error was replied: close once it is out
  bool dead = false;               // dropped: kept alive (in graveyard_) until the turn ends
  bool writable_watched = false;
  // A parked WAIT: answered when its keys exist or at its deadline.
  bool waiting = false;
  std::vector<std::string> wait_keys;
  Clock::time_point wait_deadline;
};

namespace {

constexpr int kEvents = 64;
constexpr int kAcceptsPerTurn = 32;  // then the connections already open get their turn
const auto kAcceptPause = std::chrono::milliseconds(100);

bool TokensEqual(const std::string& a, const std::string& b) {
  // Constant time in the token's content.
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    diff |= static_cast<unsigned>(i < a.size() ? a[i] : 0) ^
            static_cast<unsigned>(i < b.size() ? b[i] : 0);
  }
  return diff == 0;
}

std::string ErrorReply(const std::string& message) {
  std::string err(1, static_cast<char>(kStoreError));
  PutLengthPrefixed(&err, message);
  return err;
}

// What max_unauthenticated = 0 means: a quarter of the descriptors this process may open,
// between 64 and 4096.
int DefaultUnauthenticatedPlaces() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 4096;
  return static_cast<int>(std::clamp<rlim_t>(lim.rlim_cur / 4, 64, 4096));
}

std::string Shown(const std::string& key) {  // a key in a message: printable, not too long
  std::string s;
  for (char ch : key.substr(0, 120)) s.push_back(ch >= 0x20 && ch < 0x7f ? ch : '?');
  return key.size() > 120 ? s + "..." : s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const std::string& addr, int port, const std::string& token, const TcpStoreLimits& limits) {
  if (token.empty()) {
    return absl::InvalidArgumentError(
        "the store needs a per-job token (set DDPIO_STORE_TOKEN, or start the job with `ddpio "
        "launch`)");
  }
  auto server = std::unique_ptr<TcpStoreServer>(new TcpStoreServer());
  server->token_ = token;
  server->limits_ = limits;
  server->unauth_places_ =
      std::max(1, limits.max_unauthenticated > 0 ? limits.max_unauthenticated
                                                 : DefaultUnauthenticatedPlaces());
  DDPIO_ASSIGN_OR_RETURN(server->listener_, internal::Listen(addr, port, &server->port_));
  ::fcntl(server->listener_.get(), F_SETFL, ::fcntl(server->listener_.get(), F_GETFL) | O_NONBLOCK);
  server->epoll_ = internal::Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!server->epoll_.valid()) return ErrnoToStatus(errno, "epoll_create1");
  if (::pipe2(server->wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoToStatus(errno, "pipe");
  for (int fd : {server->listener_.get(), server->wake_pipe_[0]}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(server->epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      return ErrnoToStatus(errno, "epoll_ctl");
  }
  server->loop_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

TcpStoreServer::~TcpStoreServer() {
  stopping_ = true;
  if (wake_pipe_[1] >= 0) {
    char b = 1;
    ssize_t unused = ::write(wake_pipe_[1], &b, 1);
    (void)unused;
  }
  if (loop_.joinable()) loop_.join();
  listener_.reset();  // first: whoever sees its connection closed finds nobody listening
  for (auto& [fd, c] : conns_) ::close(fd);
  conns_.clear();
  for (int fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void TcpStoreServer::Loop() {
  epoll_event events[kEvents];
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_.get(), events, kEvents, NextTimeoutMs(Clock::now()));
    if (n < 0 && errno != EINTR) {
      DDPIO_LOG(ERROR) << "store server: epoll_wait: " << std::strerror(errno);
      return;
    }
    const auto now = Clock::now();
    bool accept = false;
    for (int i = 0; i < std::max(n, 0) && !stopping_; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_pipe_[0]) continue;
      if (fd == listener_.get()) {
        accept = true;  // after the connections already open: their hellos first
        continue;
      }
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;  // dropped earlier in this turn
      Conn& c = *it->second;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) Read(c, now);
      if (!c.dead && (events[i].events & EPOLLOUT)) Flush(c);
    }
    if (accept && !stopping_) Accept(now);
    Expire(Clock::now());
    graveyard_.clear();  // nothing refers to a dropped connection past its turn
  }
}

void TcpStoreServer::Accept(Clock::time_point now) {
  if (now < accept_paused_until_) return;
  for (int k = 0; k < kAcceptsPerTurn; ++k) {
    const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop looking at the listener for a while instead of spinning on
        // a readable socket we cannot accept from.
        accept_paused_until_ = now + kAcceptPause;
        epoll_event ev{};
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener_.get(), &ev);
        DDPIO_LOG(WARNING) << "store server: out of file descriptors (" << std::strerror(errno)
                           << "); pausing accepts for 100 ms";
      }
      return;  // EAGAIN: nothing more waiting
    }
    while (static_cast<int>(conns_.size()) >= limits_.max_connections && FreePlace(now, -1)) {
    }
    if (static_cast<int>(conns_.size()) >= limits_.max_connections) {
      ++rejected_;
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->seq = ++accepted_;
    c->accepted_at = now;
    c->hello_deadline = now + limits_.hello_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    Conn& conn = *c;
    unauth_[c->seq] = fd;
    conns_[fd] = std::move(c);
    ++open_;
    // A rank sends its hello as soon as it is connected: it is usually here already, and then
    // the rank is served now, however many other connections are waiting for theirs.
    Read(conn, now);
    // Every place before the hello taken: the connection waiting longest gives way if it had its
    // grace; if not, this one goes (its client, if it is a rank, connects again).
    while (!conn.dead && !conn.authed && static_cast<int>(unauth_.size()) > unauth_places_) {
      if (!FreePlace(now, conn.fd)) {
        ++rejected_;
        Drop(conn.fd);
      }
    }
  }
}

bool TcpStoreServer::FreePlace(Clock::time_point now, int keep) {
  if (unauth_.empty() || unauth_.begin()->second == keep) return false;
  Conn& old = *conns_.at(unauth_.begin()->second);  // the one waiting longest
  Read(old, now);                                   // its hello may be here, not yet seen
  if (old.dead || old.authed) return true;          // its place is free now
  if (now - old.accepted_at < limits_.hello_grace) return false;  // it still has its grace
  ++rejected_;
  Drop(old.fd);
  return true;
}

void TcpStoreServer::Read(Conn& c, Clock::time_point now) {
  char buf[65536];
  for (;;) {
    // Never hold more than one frame's worth: an authenticated client's largest message, a
    // stranger's hello. What arrives beyond that waits in the socket.
    const size_t cap = 4 + (c.authed ? limits_.max_message : limits_.max_hello_bytes);
    if (c.in.size() >= cap) break;
    const ssize_t got = ::recv(c.fd, buf, std::min(sizeof(buf), cap - c.in.size()), 0);
    if (got > 0 && c.close_after_flush) continue;  // on its way out: what it says is ignored
    if (got > 0 && c.waiting) {
      // One request at a time is the protocol; a client talking over its own WAIT is dropped
      // (it would otherwise sit in the buffer and wake the loop for ever).
      ++rejected_;
      Send(c, ErrorReply("a request sent while a WAIT was pending"));
      c.close_after_flush = true;
      Flush(c);
      return;
    }
    if (got > 0) {
      c.in.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (!c.authed) ++rejected_;  // closed or failed before its hello
    Drop(c.fd);                  // closed by the peer (got == 0), or an error
    return;
  }
  Process(c, now);
}

void TcpStoreServer::Process(Conn& c, Clock::time_point now) {
  while (!c.dead && !c.waiting && !c.close_after_flush && c.in.size() >= 4) {
    const uint32_t len = DecodeFixed32(c.in.data());
    const size_t limit = c.authed ? limits_.max_message : limits_.max_hello_bytes;
    if (len > limit) {
      ++rejected_;
      if (c.authed) {
        Send(c,
             ErrorReply(absl::StrCat("message of ", len, " bytes exceeds the limit of ", limit)));
        c.close_after_flush = true;
        Flush(c);
      } else {
        Drop(c.fd);  // a stranger gets no answer
      }
      return;
    }
    if (c.in.size() < 4 + static_cast<size_t>(len)) break;
    std::string frame = c.in.substr(4, len);
    c.in.erase(0, 4 + static_cast<size_t>(len));
    if (!Handle(c, frame, now)) return;
  }
  if (!c.dead) Watch(c);
}

bool TcpStoreServer::Handle(Conn& c, const std::string& frame, Clock::time_point now) {
  if (!c.authed) {
    const std::string prefix = kStoreHello;
    if (frame.compare(0, prefix.size(), prefix) != 0 ||
        !TokensEqual(frame.substr(prefix.size()), token_)) {
      ++rejected_;
      Send(c, std::string(1, static_cast<char>(kStoreAbsent)));
      c.close_after_flush = true;
      Flush(c);
      return false;
    }
    c.authed = true;
    unauth_.erase(c.seq);
    ++authenticated_;
    Send(c, std::string(1, static_cast<char>(kStoreOk)));
    return true;
  }
  ByteReader r(frame);
  uint8_t op = 0;
  std::string key, value, malformed;
  std::string reply(1, static_cast<char>(kStoreOk));
  if (!r.Le(&op)) {
    malformed = "empty request";
  } else if (op == kStoreSet) {
    if (!r.LengthPrefixed(&key) || !r.LengthPrefixed(&value) || !r.done()) {
      malformed = "malformed SET";
    } else if (Store(c, key, std::move(value))) {
      Send(c, reply);
      WakeWaiters(now);
    }
  } else if (op == kStoreGet) {
    if (!r.LengthPrefixed(&key) || !r.done()) {
      malformed = "malformed GET";
    } else {
      auto it = data_.find(key);
      if (it == data_.end()) {
        Send(c, std::string(1, static_cast<char>(kStoreAbsent)));
      } else {
        PutLengthPrefixed(&reply, it->second);
        Send(c, reply);
      }
    }
  } else if (op == kStoreWait || op == kStoreCheck) {
    uint32_t timeout_ms = 0;
    std::vector<std::string> keys;
    if (op == kStoreWait && !r.Le(&timeout_ms)) malformed = "malformed WAIT";
    while (malformed.empty() && !r.done()) {
      if (!r.LengthPrefixed(&key)) {
        malformed = "malformed key list";
        break;
      }
      keys.push_back(key);
    }
    if (malformed.empty()) {
      const bool present = std::all_of(keys.begin(), keys.end(),
                                       [&](const std::string& k) { return data_.count(k); });
      if (op == kStoreCheck) {
        reply.push_back(static_cast<char>(present ? 1 : 0));
        Send(c, reply);
      } else if (present) {
        Send(c, reply);
      } else {
        c.waiting = true;  // parked: WakeWaiters or Expire answers it
        waiting_.insert(c.fd);
        c.wait_keys = std::move(keys);
        c.wait_deadline = now + std::chrono::milliseconds(timeout_ms);
      }
    }
  } else if (op == kStoreAdd) {
    int64_t delta = 0;
    if (!r.LengthPrefixed(&key) || !r.Le(&delta) || !r.done()) {
      malformed = "malformed ADD";
    } else {
      int64_t v = 0;
      auto it = data_.find(key);
      if (it != data_.end()) v = std::strtoll(it->second.c_str(), nullptr, 10);
      if (__builtin_add_overflow(v, delta, &v)) {
        malformed = "ADD overflows the 64-bit counter";  // the counter keeps its value
      } else if (Store(c, key, std::to_string(v))) {
        PutLe(&reply, v);
        Send(c, reply);
        WakeWaiters(now);
      }
    }
  } else {
    malformed = absl::StrCat("unknown operation ", static_cast<int>(op));
  }
  if (!malformed.empty()) {
    ++rejected_;
    Send(c, ErrorReply(malformed));
    c.close_after_flush = true;
    Flush(c);
    return false;
  }
  return true;
}

bool TcpStoreServer::Store(Conn& c, const std::string& key, std::string value) {
  auto it = data_.find(key);
  const size_t before = it == data_.end() ? 0 : key.size() + it->second.size();
  const size_t after = stored_bytes_ - before + key.size() + value.size();
  if (after > limits_.max_store_bytes) {
    std::string full(1, static_cast<char>(kStoreFull));
    PutLengthPrefixed(
        &full,
        absl::StrCat("storing key '", Shown(key), "' (", key.size() + value.size(),
                     " bytes with its value) would take the store to ", after,
                     " bytes of keys and values, past its limit of ", limits_.max_store_bytes,
                     " bytes (TcpStoreLimits::max_store_bytes); it holds ", stored_bytes_, " now"));
    Send(c, std::move(full));  // refused; the connection stays open
    return false;
  }
  if (it == data_.end()) {
    data_.emplace(key, std::move(value));
  } else {
    it->second = std::move(value);
  }
  stored_bytes_ = after;
  stored_bytes_seen_ = after;
  return true;
}

void TcpStoreServer::WakeWaiters(Clock::time_point now) {
  std::vector<int> ready;
  for (int fd : waiting_) {
    const Conn& c = *conns_.at(fd);
    if (std::all_of(c.wait_keys.begin(), c.wait_keys.end(),
                    [&](const std::string& k) { return data_.count(k); })) {
      ready.push_back(fd);
    }
  }
  for (int fd : ready) Answer(fd, std::string(1, static_cast<char>(kStoreOk)), now);
}

void TcpStoreServer::Answer(int fd, std::string reply, Clock::time_point now) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  c.waiting = false;
  c.wait_keys.clear();
  waiting_.erase(fd);
  Send(c, std::move(reply));
  Process(c, now);  // its next request may already be here
}

void TcpStoreServer::Expire(Clock::time_point now) {
  if (accept_paused_until_ != Clock::time_point{} && now >= accept_paused_until_) {
    accept_paused_until_ = {};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listener_.get();
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
  }
  // unauth_ is in order of acceptance, hence of hello deadline: the expired ones come first.
  while (!unauth_.empty() && now >= conns_.at(unauth_.begin()->second)->hello_deadline) {
    ++rejected_;
    Drop(unauth_.begin()->second);
  }
  std::vector<int> timed_out;
  for (int fd : waiting_) {
    if (now >= conns_.at(fd)->wait_deadline) timed_out.push_back(fd);
  }
  for (int fd : timed_out) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) continue;
    std::string missing;
    for (const auto& k : it->second->wait_keys) {
      if (data_.count(k) == 0) {
        missing = k;
        break;
      }
    }
    std::string t(1, static_cast<char>(kStoreTimedOut));
    PutLengthPrefixed(&t, missing);
    Answer(fd, std::move(t), now);
  }
}

int TcpStoreServer::NextTimeoutMs(Clock::time_point now) const {
  Clock::time_point next = Clock::time_point::max();
  if (accept_paused_until_ != Clock::time_point{}) next = accept_paused_until_;
  if (!unauth_.empty())
    next = std::min(next, conns_.at(unauth_.begin()->second)->hello_deadline);  // the earliest
  for (int fd : waiting_) next = std::min(next, conns_.at(fd)->wait_deadline);
  if (next == Clock::time_point::max()) return -1;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
}

void TcpStoreServer::Send(Conn& c, std::string body) {
  if (c.dead) return;
  PutFixed32(&c.out, static_cast<uint32_t>(body.size()));
  c.out.append(body);
  Flush(c);
}

void TcpStoreServer::Flush(Conn& c) {
  if (c.dead) return;
  const int fd = c.fd;
  while (c.out_pos < c.out.size()) {
    const ssize_t n = ::send(fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    Drop(fd);  // the peer is gone
    return;
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
    if (c.close_after_flush) {
      Drop(fd);
      return;
    }
  } else if (c.out.size() - c.out_pos > limits_.max_message + 64) {
    ++rejected_;  // replies pile up unread: a client that does not read is not served
    Drop(fd);
    return;
  }
  Watch(c);
}

void TcpStoreServer::Watch(Conn& c) {
  if (c.dead) return;
  const bool want_out = c.out_pos < c.out.size();
  uint32_t events = EPOLLIN;
  if (want_out) events |= EPOLLOUT;
  if (want_out == c.writable_watched) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = c.fd;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd, &ev);
  c.writable_watched = want_out;
}

void TcpStoreServer::Drop(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  epoll_event ev{};
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, &ev);
  if (it->second->authed) --authenticated_;
  unauth_.erase(it->second->seq);
  waiting_.erase(fd);
  --open_;
  ::close(fd);
  it->second->dead = true;
  it->second->fd = -1;
  graveyard_.push_back(std::move(it->second));  // callers up the stack may still hold it
  conns_.erase(it);
}

}  // namespace ddpio::comm
