// ddpio's own TCP rendezvous store: rank 0 serves it at MASTER_ADDR:MASTER_PORT, every rank
// (rank 0 included) is a client.
//
// Not an open door: the server binds to the address it is given, serves nothing before a
// client presents the job's token (DDPIO_STORE_TOKEN; `ddpio launch` generates one), bounds
// every message (default 64 MiB), the bytes it stores (default 256 MiB) and the number of
// connections, and drops a client that sends anything malformed — without disturbing the
// others. Protocol (all integers little-endian, each message a 4-byte length then the body):
//   hello   "DDPS1" token                    -> [0] or [1] wrong token (then closed)
//   SET     [1] key value                    -> [0] | [4] store full: message
//   GET     [2] key                          -> [0] value | [1] absent
//   WAIT    [3] u32 timeout_ms, keys...      -> [0] all present | [2] timed out: missing key
//   ADD     [4] key i64 delta                -> [0] i64 new value | [4] store full: message
//   CHECK   [5] keys...                      -> [0] u8 all present
//   error                                    -> [3] message (then closed)
// Strings are a u32 length then bytes. A "store full" reply leaves the connection open.
//
// The server is one thread running an epoll loop over every connection: memory and threads do
// not grow with connections. A connection's hello is read the moment it is accepted (a rank
// sends it right after connecting, so it is usually there already) and served at once, however
// many other connections are waiting. Before its hello a connection may send one small frame
// (max_hello_bytes) within hello_timeout. Connections waiting for their hello take at most
// max_unauthenticated places (by default a quarter of the process's file descriptors); when they
// are all taken, a newcomer whose hello is not complete on arrival takes the place of the one
// waiting longest if that one has had hello_grace to say hello, and is closed otherwise. So every
// connection the server keeps gets at least hello_grace, whatever a flood does, and no order of
// arrival can push a rank out; a client whose connection is closed before its hello is answered
// connects again with capped, jittered exponential backoff until its deadline. At most
// max_connections in all. Buffers grow with the bytes that arrive, never with a declared length.
// A WAIT is parked, not a blocked thread: answered when its keys are set or its deadline passes.
// When file descriptors run out, accepting pauses for 100 ms instead of spinning.
#ifndef DDPIO_COMM_TCP_STORE_H_
#define DDPIO_COMM_TCP_STORE_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/comm/store.h"
#include "ddpio/common/fd.h"

namespace ddpio::comm {

struct TcpStoreLimits {
  size_t max_message = size_t{64} << 20;  // bytes per message once authenticated, either direction
  size_t max_hello_bytes = 4096;          // the hello frame (a token longer than ~4 KiB is refused)
  // In all; more are closed at once. Each rank of a job holds two: its own and its heartbeat's
  // (liveness.h) — 4096 ranks.
  int max_connections = 8192;
  // Places for connections that have not completed their hello (each holds a descriptor and at
  // most max_hello_bytes). 0 (default): a quarter of this process's descriptor limit
  // (RLIMIT_NOFILE) when the server starts, between 64 and 4096 — a flood cannot take the
  // descriptors rank 0 needs for its own connections and files. When every place is taken, see
  // hello_grace; nobody is evicted by order of arrival.
  int max_unauthenticated = 0;
  // A connection that has not completed its hello this long after it was accepted is dropped.
  std::chrono::milliseconds hello_timeout{10000};
  // The least time a kept connection has for its hello while every place is taken: only one
  // waiting this long can lose its place to a newcomer. A rank's hello arrives within a round trip
  // of its connect, so 250 ms is ample even across sites, and it bounds how fast a flood is shed
  // (max_unauthenticated per hello_grace).
  std::chrono::milliseconds hello_grace{250};
  // Keys plus values the store holds, in bytes. A SET or ADD that would take it past this is
  // refused ("store full", ResourceExhausted on the client) and the connection kept. Default
  // 256 MiB: a rendezvous of 10,000 ranks stores a few MB (addresses, ids, counters), so this is
  // far above any job's need yet keeps rank 0's memory bounded, and it is the same on every host
  // (a fraction of RAM would make the same job fail on one machine and not another).
  size_t max_store_bytes = size_t{256} << 20;
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
  // Stops the loop, stops listening, then closes every connection (parked WAITs end with the
  // connection): a client that sees its connection closed knows nobody listens any more.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  // Connections refused for a wrong token or dropped (silent, slow, malformed, oversized, over
  // the limits).
  int rejected() const { return static_cast<int>(rejected_.load()); }
  // Connections open now, and of them authenticated.
  int open_connections() const { return open_.load(); }
  int authenticated_connections() const { return authenticated_.load(); }
  // The places for connections before their hello (max_unauthenticated, resolved).
  int unauthenticated_places() const { return unauth_places_; }
  // Bytes of keys and values held now.
  size_t stored_bytes() const { return stored_bytes_seen_.load(); }

 private:
  struct Conn;
  TcpStoreServer() = default;
  void Loop();
  void Accept(std::chrono::steady_clock::time_point now);
  void Read(Conn& c, std::chrono::steady_clock::time_point now);
  // Frees the place of the connection waiting longest for its hello (not `keep`): served if its
  // hello has arrived unseen, closed if it has had hello_grace. False when it still has its grace
  // (or nobody else waits).
  bool FreePlace(std::chrono::steady_clock::time_point now, int keep);
  // Stores key = value unless the store would pass max_store_bytes; false (and "store full"
  // sent to c) then.
  bool Store(Conn& c, const std::string& key, std::string value);
  void Process(Conn& c,
               std::chrono::steady_clock::time_point now);  // the complete frames in c's buffer
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
  int unauth_places_ = 0;
  std::thread loop_;

  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<int> open_{0}, authenticated_{0};
  std::atomic<size_t> stored_bytes_seen_{0};  // stored_bytes_, for stored_bytes()

  // The loop thread's alone: no lock.
  std::map<int, std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<Conn>> graveyard_;  // dropped this turn
  std::map<uint64_t, int>
      unauth_;  // sequence -> fd of connections before their hello, longest waiting first
  std::set<int> waiting_;  // fds with a parked WAIT
  std::map<std::string, std::string> data_;
  size_t stored_bytes_ = 0;  // keys + values in data_
  uint64_t accepted_ = 0;    // sequence numbers: unauth_ in order of acceptance
  std::chrono::steady_clock::time_point accept_paused_until_{};  // after EMFILE / ENFILE
};

// Errors of every call: Unavailable when the store went away, DeadlineExceeded when its reply
// did not come in time, InvalidArgument when it rejected the request (and closed the
// connection), ResourceExhausted when a SET or ADD would take it past its max_store_bytes (the
// connection stays usable); each names the store.
class TcpStoreClient : public Store {
 public:
  // Connects to host:port and presents `token`, until `connect_timeout`: a refused connection
  // (rank 0 may start later than the others) or one closed before the hello is answered (a
  // store shedding a flood) is tried again with capped exponential backoff and jitter.
  // PermissionDenied for a wrong token (not retried); DeadlineExceeded when no server took the
  // hello in time, with the last error.
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(
      const std::string& host, int port, const std::string& token,
      std::chrono::milliseconds connect_timeout, const TcpStoreLimits& limits = {});

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
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
