#include "ddpio/comm/internal/socket.h"
#include "ddpio/comm/tcp_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/comm/internal/store_wire.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {

using internal::Clock;

using namespace internal;  // the wire format (store_wire.h)

// ---------------------------------------------------------------------------------------------

std::string RandomToken(int bytes) {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&s, "%02x", rd() & 0xff);
  return s;
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
  DDPIO_RETURN_IF_ERROR(internal::WriteFrame(client->fd_.get(), std::string(kStoreHello) + token, deadline));
  auto answer = internal::ReadFrame(client->fd_.get(), 16, deadline + std::chrono::seconds(5));
  if (!answer.ok() || answer->empty()) {
    return absl::UnavailableError(absl::StrCat("store at ", client->where_, " closed the connection during the hello"));
  }
  if ((*answer)[0] != static_cast<char>(kStoreOk)) {
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
  const auto deadline = Clock::now() + wait + limits_.reply_timeout;
  absl::Status sent = internal::WriteFrame(fd_.get(), request, deadline);
  if (!sent.ok()) return Annotate(sent, absl::StrCat("store at ", where_));
  auto reply = internal::ReadFrame(fd_.get(), limits_.max_message, deadline);
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("store at ", where_));
  if (reply->empty()) return absl::DataLossError(absl::StrCat("empty reply from the store at ", where_));
  if ((*reply)[0] == static_cast<char>(kStoreError)) {
    WireReader r(*reply);
    uint8_t tag;
    std::string message;
    r.U8(&tag);
    r.Str(&message);
    return absl::InvalidArgumentError(absl::StrCat("store at ", where_, " rejected the request: ", message));
  }
  return reply;
}

absl::Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  std::string req(1, static_cast<char>(kStoreSet));
  PutStr(&req, key);
  PutStr(&req, value);
  return Call(req, std::chrono::milliseconds(0)).status();
}

absl::Status TcpStoreClient::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::string req(1, static_cast<char>(kStoreWait));
  PutU32(&req, static_cast<uint32_t>(std::clamp<int64_t>(timeout.count(), 0, UINT32_MAX)));
  for (const auto& k : keys) PutStr(&req, k);
  absl::StatusOr<std::string> reply = Call(req, timeout);
  if (!reply.ok()) return reply.status();
  WireReader r(*reply);
  uint8_t tag = kStoreOk;
  std::string missing;
  if (r.U8(&tag) && tag == kStoreTimedOut) {
    r.Str(&missing);
    return absl::DeadlineExceededError(absl::StrCat("store at ", where_, ": key '", missing,
                                                    "' not set within ", timeout.count(), " ms"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStoreClient::Get(const std::string& key, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(Wait({key}, timeout));
  std::string req(1, static_cast<char>(kStoreGet));
  PutStr(&req, key);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  WireReader r(*reply);
  uint8_t tag = 0;
  std::string value;
  if (!r.U8(&tag) || tag != kStoreOk || !r.Str(&value)) {
    return absl::DataLossError(absl::StrCat("store at ", where_, ": malformed reply to GET '", key, "'"));
  }
  return value;
}

absl::StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  std::string req(1, static_cast<char>(kStoreAdd));
  PutStr(&req, key);
  PutI64(&req, delta);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  WireReader r(*reply);
  uint8_t tag = 0;
  int64_t value = 0;
  if (!r.U8(&tag) || !r.I64(&value)) return absl::DataLossError("malformed reply to ADD");
  return value;
}

absl::StatusOr<bool> TcpStoreClient::Check(const std::vector<std::string>& keys) {
  std::string req(1, static_cast<char>(kStoreCheck));
  for (const auto& k : keys) PutStr(&req, k);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  return reply->size() >= 2 && (*reply)[1] == 1;
}

}  // namespace ddpio::comm
