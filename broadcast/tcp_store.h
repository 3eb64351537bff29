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
// Strings are a u32 length then bytes. One thread per connection (jobs of thousands of ranks
// would want an event loop; documented in docs/COMM.md).
#ifndef DDPIO_BROADCAST_TCP_STORE_H_
#define DDPIO_BROADCAST_TCP_STORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "broadcast/internal/socket.h"
#include "broadcast/store.h"

namespace ddpio::broadcast {

struct TcpStoreLimits {
  size_t max_message = size_t{64} << 20;  // bytes per message, either direction
  int max_connections = 4096;
  std::chrono::milliseconds hello_timeout{10000};  // a silent connection is dropped after this
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
  // Stops accepting, disconnects every client, joins every thread.
  ~TcpStoreServer();
  int port() const { return port_; }
  // Connections refused for a wrong token, and dropped for malformed or oversized messages.
  int rejected() const { return rejected_.load(); }

 private:
  TcpStoreServer() = default;
  void AcceptLoop();
  void Serve(int fd);
  absl::StatusOr<std::string> Handle(const std::string& request);

  std::string token_;
  TcpStoreLimits limits_;
  internal::Fd listener_;
  int wake_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> rejected_{0};
  std::thread acceptor_;

  std::mutex mu_;  // guards everything below
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
  std::vector<std::thread> clients_;
  std::vector<int> client_fds_;
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
  internal::Fd fd_;
  std::string where_;
  TcpStoreLimits limits_;
};

}  // namespace ddpio::broadcast

#endif  // DDPIO_BROADCAST_TCP_STORE_H_
