// A client for PyTorch's TCPStore wire protocol, so that ddpio ranks started by torchrun meet
// through the store its agent already serves on MASTER_ADDR:MASTER_PORT
// (TORCHELASTIC_USE_AGENT_STORE=True; the port is taken, so rank 0 cannot serve its own).
//
// Two wire protocols exist, with different operation numbers:
//   legacy  (PyTorch up to 2.0, e.g. Debian 12's 1.13):  SET 0, GET 2, ADD 3, CHECK 4, WAIT 5,
//            GETNUMKEYS 6;
//   current (PyTorch 2.3 and later): the connection opens with VALIDATE (0, then the u32 magic
//            0x3C85F7CE); SET 1, GET 3, ADD 4, CHECK 5, WAIT 6.
// Messages are the operation byte, then strings and byte vectors as a u64 length and the bytes,
// integers as native 64-bit little-endian values; keys carry a leading "/" as PyTorch's own
// clients send them (so a key "k" here is "k" for a Python TCPStore client too). Replies: GET a
// vector, ADD an i64, CHECK one byte (0 = all present), WAIT one byte once every key exists; SET
// none.
//
// kAuto tells them apart once per connection: it sends the legacy GETNUMKEYS, which a legacy
// server answers at once with 8 bytes; a current server does not (it wants VALIDATE first), so
// after `probe_timeout` the client reconnects and speaks the current protocol. The PyTorch 2.1–2.2
// variants (a per-query magic prefix) are not supported: their store does not answer, and the
// error says so. DDPIO_TORCH_STORE_PROTOCOL=legacy|current skips the probe.
//
// The agent store has no token (PyTorch's design); values read are bounded by max_value. A
// timed-out or failed exchange leaves the connection in an unknown state: it is dropped and the
// next call reconnects.
#ifndef DDPIO_COMM_TORCH_STORE_H_
#define DDPIO_COMM_TORCH_STORE_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/comm/store.h"
#include "ddpio/common/fd.h"

namespace ddpio::comm {

enum class TorchStoreProtocol { kAuto, kLegacy, kCurrent };

absl::StatusOr<TorchStoreProtocol> ParseTorchStoreProtocol(
    std::string_view name);  // auto|legacy|current

struct TorchStoreOptions {
  TorchStoreProtocol protocol = TorchStoreProtocol::kAuto;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds probe_timeout{std::chrono::milliseconds(1500)};
  size_t max_value = size_t{64} << 20;
};

class TorchStoreClient : public Store {
 public:
  // DeadlineExceeded when nothing listens within connect_timeout.
  static absl::StatusOr<std::unique_ptr<TorchStoreClient>> Connect(
      const std::string& host, int port, const TorchStoreOptions& options = {});
  // The protocol in use (never kAuto).
  TorchStoreProtocol protocol() const { return protocol_; }

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;

 private:
  TorchStoreClient(std::string host, int port, TorchStoreOptions options)
      : host_(std::move(host)), port_(port), options_(options) {}
  // Connects (and handshakes) if the connection was dropped.
  absl::Status EnsureConnected();
  // Opens a fresh connection: VALIDATE for the current protocol, nothing for the legacy one.
  absl::Status Handshake();
  absl::Status Detect();
  // Sends `request` and reads `reply_size` bytes (0: none) before `deadline`; drops the
  // connection on failure.
  absl::Status Exchange(const std::string& request, void* reply, size_t reply_size,
                        std::chrono::steady_clock::time_point deadline, const std::string& what);
  absl::Status WaitLocked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::string Where() const;

  const std::string host_;
  const int port_;
  const TorchStoreOptions options_;
  TorchStoreProtocol protocol_ = TorchStoreProtocol::kAuto;
  std::mutex mu_;  // one exchange at a time
  Fd fd_;
};

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_TORCH_STORE_H_
