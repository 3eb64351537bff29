// ddpio's own TCP rendezvous store: rank 0 serves it at MASTER_ADDR:MASTER_PORT, every rank
// (rank 0 included) is a client.
//
// Not an open door: the server binds to the address it is given, serves nothing before a
// client presents the job's token (DDPIO_STORE_TOKEN; `ddpio launch` generates one), bounds
// every message (default 64 MiB) and the number of connections, and drops a client that sends
// anything malformed — without disturbing the others. Protocol (all integers little-endian,
// each message a 4-byte length then the body):
//   hello   "DDPS1" token                    -> [0] or [1] wrong token (then closed)
//   SET     [1] key value                    -> [0]
//   GET     [2] key                          -> [0] value | [1] absent
//   WAIT    [3] u32 timeout_ms, keys...      -> [0] all present | [2] timed out: missing key
//   ADD     [4] key i64 delta                -> [0] i64 new value
//   CHECK   [5] keys...                      -> [0] u8 all present
//   error                                    -> [3] message (then closed)
// Strings are a u32 length then bytes.
//
// The server is one thread running an epoll loop over every connection: memory and threads do
// not grow with connections. Before its hello a connection may send one small frame
// (max_hello_bytes) within hello_timeout; at most max_unauthenticated such connections are held
// (a newer one evicts the oldest, so a flood of silent or slow connections cannot lock the
// ranks out), at most max_connections in all. Buffers grow with the bytes that arrive, never
// with a declared length. A WAIT is parked, not a blocked thread: answered when its keys are set
// or its deadline passes. When file descriptors run out, accepting pauses for 100 ms instead of
// spinning.
#ifndef DDPIO_COMM_TCP_STORE_H_
#define DDPIO_COMM_TCP_STORE_H_

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/common/fd.h"
#include "ddpio/comm/store.h"

namespace ddpio::comm {

struct TcpStoreLimits {
  size_t max_message = size_t{64} << 20;  // bytes per message once authenticated, either direction
  size_t max_hello_bytes = 4096;          // the hello frame (a token longer than ~4 KiB is refused)
  int max_connections = 4096;             // in all; more are closed at once
  int max_unauthenticated = 64;           // held before their hello; a newer evicts the oldest
  std::chrono::milliseconds hello_timeout{10000};  // a connection silent this long is dropped
  // Client: a reply must arrive within this (on top of a WAIT's own timeout), or the call fails
  // with DeadlineExceeded — a stalled store holds a rank no longer.
  std::chrono::milliseconds reply_timeout{30000};
};

// A fresh job token: 2 x `bytes` hex digits from std::random_device. Used by `ddpio launch`, by a
// process that starts alone (its private store) and by the NCCL stand-in's unique ids.
std::string RandomToken(int bytes = 16);

class TcpStoreServer {
 public:
  // Starts serving on addr:port (port 0: a free port, see port()). InvalidArgument for an empty
  // token; errors binding the address (e.g. the port is taken).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& addr, int port,
                                                               const std::string& token,
                                                               const TcpStoreLimits& limits = {});
  // Stops the loop, closes every connection (parked WAITs end with the connection).
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  // Connections refused for a wrong token, evicted or dropped (silent, malformed, oversized,
  // over the limits).
  int rejected() const { return static_cast<int>(rejected_.load()); }
  // Connections open now, and of them authenticated.
  int open_connections() const { return open_.load(); }
  int authenticated_connections() const { return authenticated_.load(); }

 private:
  struct Conn;
  TcpStoreServer() = default;
  void Loop();
  void Accept(std::chrono::steady_clock::time_point now);
  void Read(Conn& c, std::chrono::steady_clock::time_point now);
  void Process(Conn& c, std::chrono::steady_clock::time_point now);  // the complete frames in c's buffer
  bool Handle(Conn& c, const std::string& frame, std::chrono::steady_clock::time_point now);
  void Send(Conn& c, std::string body);
  void Flush(Conn& c);
  void Drop(int fd);
  void WakeWaiters(std::chrono::steady_clock::time_point now);
  // Unparks fd's WAIT with `reply`, then serves whatever it sent next.
  void Answer(int fd, std::string reply, std::chrono::steady_clock::time_point now);
  void Expire(std::chrono::steady_clock::time_point now);
  int NextTimeoutMs(std::chrono::steady_clock::time_point now) const;
  void Watch(Conn& c);

  // Constant after Start.
  std::string token_;
  TcpStoreLimits limits_;
  Fd listener_;
  Fd epoll_;
  int wake_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::thread loop_;

  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<int> open_{0}, authenticated_{0};

  // The loop thread's alone: no lock.
  std::map<int, std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<Conn>> graveyard_;  // dropped this turn
  std::map<uint64_t, int> unauth_;  // sequence -> fd of connections before their hello, oldest first
  std::set<int> waiting_;           // fds with a parked WAIT
  std::map<std::string, std::string> data_;
  uint64_t accepted_ = 0;                    // sequence numbers: the oldest unauthenticated goes first
  std::chrono::steady_clock::time_point accept_paused_until_{};  // after EMFILE / ENFILE
};

class TcpStoreClient : public Store {
 public:
  // Connects to host:port, retrying refused connections until `connect_timeout` (rank 0 may
  // start later than the others), and presents `token`. PermissionDenied for a wrong token;
  // DeadlineExceeded when no server answered in time.
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(
      const std::string& host, int port, const std::string& token,
      std::chrono::milliseconds connect_timeout, const TcpStoreLimits& limits = {});

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;

 private:
  TcpStoreClient() = default;
  // One request and its reply; `wait` extends the reply deadline for server-side waits.
  absl::StatusOr<std::string> Call(const std::string& request, std::chrono::milliseconds wait);

  std::mutex mu_;  // one request at a time
  Fd fd_;
  std::string where_;
  TcpStoreLimits limits_;
};

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_TCP_STORE_H_
