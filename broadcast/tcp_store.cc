#include "broadcast/tcp_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace ddpio::broadcast {

using internal::Clock;

namespace {

constexpr char kHello[] = "DDPS1";
enum Op : uint8_t { kSet = 1, kGet = 2, kWait = 3, kAdd = 4, kCheck = 5 };
enum Reply : uint8_t { kOk = 0, kAbsent = 1, kTimedOut = 2, kError = 3 };

void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void PutI64(std::string* s, int64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
}
void PutStr(std::string* s, const std::string& v) {
  PutU32(s, static_cast<uint32_t>(v.size()));
  s->append(v);
}

// Reads fields from a message; any overrun is an error, never a crash.
class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  bool U8(uint8_t* v) {
    if (pos_ + 1 > s_.size()) return false;
    *v = static_cast<uint8_t>(s_[pos_++]);
    return true;
  }
  bool U32(uint32_t* v) {
    if (pos_ + 4 > s_.size()) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<uint8_t>(s_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool I64(int64_t* v) {
    if (pos_ + 8 > s_.size()) return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<uint8_t>(s_[pos_ + i])) << (8 * i);
    *v = static_cast<int64_t>(u);
    pos_ += 8;
    return true;
  }
  bool Str(std::string* v) {
    uint32_t n = 0;
    if (!U32(&n) || pos_ + n > s_.size()) return false;
    v->assign(s_, pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

bool TokensEqual(const std::string& a, const std::string& b) {
  // Constant time in the token's content.
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    diff |= static_cast<unsigned>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned>(i < b.size() ? b[i] : 0);
  }
  return diff == 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string RandomToken(int bytes) {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&s, "%02x", rd() & 0xff);
  return s;
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& addr, int port,
                                                                      const std::string& token,
                                                                      const TcpStoreLimits& limits) {
  if (token.empty()) {
    return absl::InvalidArgumentError(
        "the store needs a per-job token (set DDPIO_STORE_TOKEN, or start the job with `ddpio launch`)");
  }
  auto server = std::unique_ptr<TcpStoreServer>(new TcpStoreServer());
  server->token_ = token;
  server->limits_ = limits;
  DDPIO_ASSIGN_OR_RETURN(server->listener_, internal::Listen(addr, port, &server->port_));
  if (::pipe2(server->wake_pipe_, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

TcpStoreServer::~TcpStoreServer() {
  stopping_ = true;
  char b = 1;
  ssize_t unused = ::write(wake_pipe_[1], &b, 1);
  (void)unused;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> clients;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes readers
    clients.swap(clients_);
  }
  changed_.notify_all();  // wakes WAITs
  for (auto& t : clients) t.join();
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void TcpStoreServer::AcceptLoop() {
  while (!stopping_) {
    pollfd p[2] = {{listener_.get(), POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) continue;
    if (p[1].revents != 0 || stopping_) return;
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(client_fds_.size()) >= limits_.max_connections) {
      ++rejected_;
      ::close(fd);
      continue;
    }
    client_fds_.push_back(fd);
    clients_.emplace_back([this, fd] { Serve(fd); });
  }
}

void TcpStoreServer::Serve(int fd) {
  auto finish = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    client_fds_.erase(std::find(client_fds_.begin(), client_fds_.end(), fd));
    ::close(fd);
  };
  auto hello = internal::ReadFrame(fd, limits_.max_message, Clock::now() + limits_.hello_timeout);
  const std::string expected_prefix = kHello;
  if (!hello.ok() || hello->compare(0, expected_prefix.size(), expected_prefix) != 0 ||
      !TokensEqual(hello->substr(expected_prefix.size()), token_)) {
    ++rejected_;
    if (hello.ok()) {
      (void)internal::WriteFrame(fd, std::string(1, static_cast<char>(kAbsent)), Clock::now() + std::chrono::seconds(1));
    }
    finish();
    return;
  }
  (void)internal::WriteFrame(fd, std::string(1, static_cast<char>(kOk)), Clock::now() + std::chrono::seconds(5));
  while (!stopping_) {
    // Clients may stay quiet for long (between rendezvous); only stopping ends the wait.
    auto request = internal::ReadFrame(fd, limits_.max_message, Clock::now() + std::chrono::hours(24 * 365));
    if (!request.ok()) {
      if (request.status().code() == absl::StatusCode::kInvalidArgument) {
        ++rejected_;
        std::string err(1, static_cast<char>(kError));
        PutStr(&err, std::string(request.status().message()));
        (void)internal::WriteFrame(fd, err, Clock::now() + std::chrono::seconds(1));
      }
      break;
    }
    auto reply = Handle(*request);
    if (!reply.ok()) {
      ++rejected_;
      std::string err(1, static_cast<char>(kError));
      PutStr(&err, std::string(reply.status().message()));
      (void)internal::WriteFrame(fd, err, Clock::now() + std::chrono::seconds(1));
      break;
    }
    if (!internal::WriteFrame(fd, *reply, Clock::now() + std::chrono::seconds(30)).ok()) break;
  }
  finish();
}

absl::StatusOr<std::string> TcpStoreServer::Handle(const std::string& request) {
  Reader r(request);
  uint8_t op = 0;
  if (!r.U8(&op)) return absl::InvalidArgumentError("empty request");
  std::string reply(1, static_cast<char>(kOk));
  std::string key, value;
  switch (op) {
    case kSet: {
      if (!r.Str(&key) || !r.Str(&value) || !r.done()) return absl::InvalidArgumentError("malformed SET");
      {
        std::lock_guard<std::mutex> lock(mu_);
        data_[key] = std::move(value);
      }
      changed_.notify_all();
      return reply;
    }
    case kGet: {
      if (!r.Str(&key) || !r.done()) return absl::InvalidArgumentError("malformed GET");
      std::lock_guard<std::mutex> lock(mu_);
      auto it = data_.find(key);
      if (it == data_.end()) return std::string(1, static_cast<char>(kAbsent));
      PutStr(&reply, it->second);
      return reply;
    }
    case kWait:
    case kCheck: {
      uint32_t timeout_ms = 0;
      if (op == kWait && !r.U32(&timeout_ms)) return absl::InvalidArgumentError("malformed WAIT");
      std::vector<std::string> keys;
      while (!r.done()) {
        if (!r.Str(&key)) return absl::InvalidArgumentError("malformed key list");
        keys.push_back(key);
      }
      std::unique_lock<std::mutex> lock(mu_);
      std::string missing;
      auto all_present = [&] {
        for (const auto& k : keys) {
          if (data_.count(k) == 0) {
            missing = k;
            return false;
          }
        }
        return true;
      };
      if (op == kCheck) {
        reply.push_back(static_cast<char>(all_present() ? 1 : 0));
        return reply;
      }
      const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
      if (!changed_.wait_until(lock, deadline, [&] { return stopping_ || all_present(); }) || stopping_) {
        std::string t(1, static_cast<char>(kTimedOut));
        PutStr(&t, missing);
        return t;
      }
      return reply;
    }
    case kAdd: {
      int64_t delta = 0;
      if (!r.Str(&key) || !r.I64(&delta) || !r.done()) return absl::InvalidArgumentError("malformed ADD");
      int64_t now = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = data_.find(key);
        if (it != data_.end()) now = std::strtoll(it->second.c_str(), nullptr, 10);
        now += delta;
        data_[key] = std::to_string(now);
      }
      changed_.notify_all();
      PutI64(&reply, now);
      return reply;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown operation ", static_cast<int>(op)));
  }
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const std::string& host, int port, const std::string& token, std::chrono::milliseconds connect_timeout,
    const TcpStoreLimits& limits) {
  auto client = std::unique_ptr<TcpStoreClient>(new TcpStoreClient());
  client->where_ = absl::StrCat(host, ":", port);
  client->limits_ = limits;
  const auto deadline = Clock::now() + connect_timeout;
  DDPIO_ASSIGN_OR_RETURN(client->fd_, internal::ConnectRetrying(host, port, connect_timeout, "rendezvous store"));
  DDPIO_RETURN_IF_ERROR(internal::WriteFrame(client->fd_.get(), std::string(kHello) + token, deadline));
  auto answer = internal::ReadFrame(client->fd_.get(), 16, deadline + std::chrono::seconds(5));
  if (!answer.ok() || answer->empty()) {
    return absl::UnavailableError(absl::StrCat("store at ", client->where_, " closed the connection during the hello"));
  }
  if ((*answer)[0] != static_cast<char>(kOk)) {
    return absl::PermissionDeniedError(absl::StrCat("store at ", client->where_,
                                                    " refused this job's token (DDPIO_STORE_TOKEN differs?)"));
  }
  return client;
}

absl::StatusOr<std::string> TcpStoreClient::Call(const std::string& request, std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(mu_);
  if (request.size() > limits_.max_message) {
    return absl::InvalidArgumentError(absl::StrCat("store request of ", request.size(),
                                                   " bytes exceeds the limit of ", limits_.max_message));
  }
  const auto deadline = Clock::now() + wait + std::chrono::seconds(30);
  absl::Status sent = internal::WriteFrame(fd_.get(), request, deadline);
  if (!sent.ok()) return Annotate(sent, absl::StrCat("store at ", where_));
  auto reply = internal::ReadFrame(fd_.get(), limits_.max_message, deadline);
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("store at ", where_));
  if (reply->empty()) return absl::DataLossError(absl::StrCat("empty reply from the store at ", where_));
  if ((*reply)[0] == static_cast<char>(kError)) {
    Reader r(*reply);
    uint8_t tag;
    std::string message;
    r.U8(&tag);
    r.Str(&message);
    return absl::InvalidArgumentError(absl::StrCat("store at ", where_, " rejected the request: ", message));
  }
  return reply;
}

absl::Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  std::string req(1, static_cast<char>(kSet));
  PutStr(&req, key);
  PutStr(&req, value);
  return Call(req, std::chrono::milliseconds(0)).status();
}

absl::Status TcpStoreClient::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::string req(1, static_cast<char>(kWait));
  PutU32(&req, static_cast<uint32_t>(std::clamp<int64_t>(timeout.count(), 0, UINT32_MAX)));
  for (const auto& k : keys) PutStr(&req, k);
  absl::StatusOr<std::string> reply = Call(req, timeout);
  if (!reply.ok()) return reply.status();
  Reader r(*reply);
  uint8_t tag = kOk;
  std::string missing;
  if (r.U8(&tag) && tag == kTimedOut) {
    r.Str(&missing);
    return absl::DeadlineExceededError(absl::StrCat("store at ", where_, ": key '", missing,
                                                    "' not set within ", timeout.count(), " ms"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStoreClient::Get(const std::string& key, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(Wait({key}, timeout));
  std::string req(1, static_cast<char>(kGet));
  PutStr(&req, key);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  Reader r(*reply);
  uint8_t tag = 0;
  std::string value;
  if (!r.U8(&tag) || tag != kOk || !r.Str(&value)) {
    return absl::DataLossError(absl::StrCat("store at ", where_, ": malformed reply to GET '", key, "'"));
  }
  return value;
}

absl::StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  std::string req(1, static_cast<char>(kAdd));
  PutStr(&req, key);
  PutI64(&req, delta);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  Reader r(*reply);
  uint8_t tag = 0;
  int64_t value = 0;
  if (!r.U8(&tag) || !r.I64(&value)) return absl::DataLossError("malformed reply to ADD");
  return value;
}

absl::StatusOr<bool> TcpStoreClient::Check(const std::vector<std::string>& keys) {
  std::string req(1, static_cast<char>(kCheck));
  for (const auto& k : keys) PutStr(&req, k);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  return reply->size() >= 2 && (*reply)[1] == 1;
}

}  // namespace ddpio::broadcast
