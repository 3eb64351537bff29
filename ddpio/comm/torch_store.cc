#include "ddpio/comm/torch_store.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/internal/socket.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {
namespace {

using internal::Clock;

constexpr uint32_t kValidateMagic = 0x3C85F7CE;

struct Ops {
  uint8_t set, get, add, check, wait;
};
constexpr Ops kLegacy{0, 2, 3, 4, 5};
constexpr Ops kCurrent{1, 3, 4, 5, 6};
constexpr uint8_t kLegacyGetNumKeys = 6;
constexpr uint8_t kCurrentValidate = 0;

const Ops& OpsOf(TorchStoreProtocol p) {
  return p == TorchStoreProtocol::kLegacy ? kLegacy : kCurrent;
}

// Request builder: native little-endian integers, strings as u64 length + bytes.
class Request {
 public:
  explicit Request(uint8_t op) { bytes_.push_back(static_cast<char>(op)); }
  Request& U64(uint64_t v) { return Raw(&v, sizeof(v)); }
  Request& I64(int64_t v) { return Raw(&v, sizeof(v)); }
  Request& U32(uint32_t v) { return Raw(&v, sizeof(v)); }
  Request& Str(const std::string& s) {
    U64(s.size());
    bytes_ += s;
    return *this;
  }
  // PyTorch's clients put "/" before every key on the wire; so do we, to share its namespace.
  Request& Key(const std::string& k) { return Str("/" + k); }
  Request& Keys(const std::vector<std::string>& keys) {
    U64(keys.size());
    for (const auto& k : keys) Key(k);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  Request& Raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

const char* Name(TorchStoreProtocol p) {
  switch (p) {
    case TorchStoreProtocol::kLegacy:
      return "legacy (PyTorch <= 2.0)";
    case TorchStoreProtocol::kCurrent:
      return "current (PyTorch >= 2.3)";
    default:
      return "auto";
  }
}

}  // namespace

absl::StatusOr<TorchStoreProtocol> ParseTorchStoreProtocol(std::string_view name) {
  static constexpr EnumName<TorchStoreProtocol> kProtocols[] = {
      {TorchStoreProtocol::kAuto, "auto"},
      {TorchStoreProtocol::kLegacy, "legacy"},
      {TorchStoreProtocol::kCurrent, "current"}};
  if (name.empty()) return TorchStoreProtocol::kAuto;
  return ParseName(kProtocols, name, "PyTorch store protocol");
}

absl::StatusOr<std::unique_ptr<TorchStoreClient>> TorchStoreClient::Connect(
    const std::string& host, int port, const TorchStoreOptions& options) {
  auto client = std::unique_ptr<TorchStoreClient>(new TorchStoreClient(host, port, options));
  DDPIO_ASSIGN_OR_RETURN(client->fd_,
                         internal::ConnectRetrying(host, port, options.connect_timeout,
                                                   "PyTorch TCPStore (torchrun's agent store)"));
  client->protocol_ = options.protocol;
  if (client->protocol_ == TorchStoreProtocol::kAuto) {
    DDPIO_RETURN_IF_ERROR(client->Detect());
  } else {
    DDPIO_RETURN_IF_ERROR(client->Handshake());
  }
  DDPIO_LOG(INFO) << "torchrun's agent store at " << client->Where() << ": "
                  << Name(client->protocol_) << " protocol";
  return client;
}

std::string TorchStoreClient::Where() const { return absl::StrCat(host_, ":", port_); }

absl::Status TorchStoreClient::Detect() {
  // A legacy server answers GETNUMKEYS with an i64 at once; a current one waits for VALIDATE.
  int64_t keys = 0;
  const std::string probe(1, static_cast<char>(kLegacyGetNumKeys));
  absl::Status s = internal::WriteAll(fd_.get(), probe.data(), probe.size(),
                                      Clock::now() + options_.probe_timeout);
  if (s.ok())
    s = internal::ReadFull(fd_.get(), &keys, sizeof(keys), Clock::now() + options_.probe_timeout);
  if (s.ok()) {
    protocol_ = TorchStoreProtocol::kLegacy;
    return absl::OkStatus();
  }
  protocol_ = TorchStoreProtocol::kCurrent;
  fd_ = internal::Fd();
  return EnsureConnected();
}

absl::Status TorchStoreClient::EnsureConnected() {
  if (fd_.valid()) return absl::OkStatus();
  DDPIO_ASSIGN_OR_RETURN(fd_,
                         internal::ConnectRetrying(host_, port_, options_.connect_timeout,
                                                   "PyTorch TCPStore (torchrun's agent store)"));
  return Handshake();
}

absl::Status TorchStoreClient::Handshake() {
  if (protocol_ == TorchStoreProtocol::kCurrent) {
    Request validate(kCurrentValidate);
    validate.U32(kValidateMagic);
    absl::Status s = internal::WriteAll(fd_.get(), validate.bytes().data(), validate.bytes().size(),
                                        Clock::now() + options_.connect_timeout);
    if (!s.ok()) {
      fd_ = internal::Fd();
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status TorchStoreClient::Exchange(const std::string& request, void* reply, size_t reply_size,
                                        Clock::time_point deadline, const std::string& what) {
  DDPIO_RETURN_IF_ERROR(EnsureConnected());
  absl::Status s = internal::WriteAll(fd_.get(), request.data(), request.size(), deadline);
  if (s.ok() && reply_size > 0) s = internal::ReadFull(fd_.get(), reply, reply_size, deadline);
  if (s.ok()) return s;
  fd_ = internal::Fd();  // the stream is out of step now
  std::string hint =
      s.code() == absl::StatusCode::kDeadlineExceeded
          ? ""
          : absl::StrCat(" (with the ", Name(protocol_),
                         " protocol; PyTorch 2.1-2.2 stores are not supported — set "
                         "DDPIO_TORCH_STORE_PROTOCOL, or start with `ddpio launch`)");
  return absl::Status(
      s.code(), absl::StrCat(what, " on torchrun's store at ", Where(), ": ", s.message(), hint));
}

absl::Status TorchStoreClient::Set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  Request r(OpsOf(protocol_).set);
  r.Key(key).Str(value);
  return Exchange(r.bytes(), nullptr, 0, Clock::now() + options_.connect_timeout,
                  absl::StrCat("set '", key, "'"));
}

absl::Status TorchStoreClient::WaitLocked(const std::vector<std::string>& keys,
                                          std::chrono::milliseconds timeout) {
  Request r(OpsOf(protocol_).wait);
  r.Keys(keys);
  uint8_t done = 0xFF;
  absl::Status s = Exchange(
      r.bytes(), &done, 1, Clock::now() + timeout,
      absl::StrCat("waiting for '", keys.empty() ? "" : keys.front(), "'",
                   keys.size() > 1 ? absl::StrCat(" and ", keys.size() - 1, " more") : ""));
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat(
        "key '", keys.front(), "'", keys.size() > 1 ? " (or another)" : "",
        " not set in torchrun's store at ", Where(), " within ", timeout.count(), " ms"));
  }
  DDPIO_RETURN_IF_ERROR(s);
  if (done != 0) {
    fd_ = internal::Fd();
    return absl::DataLossError(
        absl::StrCat("torchrun's store at ", Where(), " answered a wait with ", int{done}));
  }
  return absl::OkStatus();
}

absl::Status TorchStoreClient::Wait(const std::vector<std::string>& keys,
                                    std::chrono::milliseconds timeout) {
  if (keys.empty()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return WaitLocked(keys, timeout);
}

absl::StatusOr<std::string> TorchStoreClient::Get(const std::string& key,
                                                  std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  DDPIO_RETURN_IF_ERROR(WaitLocked({key}, timeout));  // a GET of a missing key kills the connection
  Request r(OpsOf(protocol_).get);
  r.Key(key);
  const auto deadline = Clock::now() + options_.connect_timeout;
  uint64_t size = 0;
  DDPIO_RETURN_IF_ERROR(
      Exchange(r.bytes(), &size, sizeof(size), deadline, absl::StrCat("get '", key, "'")));
  if (size > options_.max_value) {
    fd_ = internal::Fd();
    return absl::DataLossError(absl::StrCat("torchrun's store at ", Where(), " sent ", size,
                                            " bytes for '", key, "', more than the limit of ",
                                            options_.max_value));
  }
  // Grow with the bytes that arrive, not with the size the server claims.
  std::string value;
  absl::Status s;
  while (s.ok() && value.size() < size) {
    const size_t have = value.size(), n = std::min<uint64_t>(size - have, size_t{1} << 20);
    value.resize(have + n);
    s = internal::ReadFull(fd_.get(), value.data() + have, n, deadline);
  }
  if (!s.ok()) {
    fd_ = internal::Fd();
    return absl::Status(s.code(), absl::StrCat("get '", key, "' on torchrun's store at ", Where(),
                                               ": ", s.message()));
  }
  return value;
}

absl::StatusOr<int64_t> TorchStoreClient::Add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  Request r(OpsOf(protocol_).add);
  r.Key(key).I64(delta);
  int64_t value = 0;
  DDPIO_RETURN_IF_ERROR(Exchange(r.bytes(), &value, sizeof(value),
                                 Clock::now() + options_.connect_timeout,
                                 absl::StrCat("add '", key, "'")));
  return value;
}

absl::StatusOr<bool> TorchStoreClient::Check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  Request r(OpsOf(protocol_).check);
  r.Keys(keys);
  uint8_t ready = 0xFF;
  DDPIO_RETURN_IF_ERROR(
      Exchange(r.bytes(), &ready, 1, Clock::now() + options_.connect_timeout, "check"));
  if (ready > 1) {
    fd_ = internal::Fd();
    return absl::DataLossError(
        absl::StrCat("torchrun's store at ", Where(), " answered a check with ", int{ready}));
  }
  return ready == 0;
}

}  // namespace ddpio::comm
