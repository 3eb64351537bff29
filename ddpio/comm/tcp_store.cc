#include "ddpio/comm/tcp_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ddpio/comm/internal/socket.h"
#include "ddpio/comm/internal/store_wire.h"
#include "ddpio/common/coding.h"
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

namespace {

// Backoff between attempts whose connection was closed before the hello was answered: from
// kFirstPause doubling to kMaxPause, each pause drawn uniformly from its upper half, so that
// ranks turned away together do not come back together.
constexpr auto kFirstPause = std::chrono::milliseconds(20);
constexpr auto kMaxPause = std::chrono::milliseconds(1000);
// A connection made at the last moment still gets this long for the store's answer to its hello.
constexpr auto kHelloPatience = std::chrono::seconds(2);

// One attempt: the hello on a connected socket and its answer. OK, PermissionDenied (wrong
// token), or the error that ended the attempt (closed, reset, no answer in time).
absl::Status Hello(int fd, const std::string& token, Clock::time_point deadline,
                   const std::string& where) {
  DDPIO_RETURN_IF_ERROR(internal::WriteFrame(fd, std::string(kStoreHello) + token, deadline));
  DDPIO_ASSIGN_OR_RETURN(std::string answer, internal::ReadFrame(fd, 16, deadline));
  if (answer.empty()) return absl::DataLossError("empty answer to the hello");
  if (answer[0] != static_cast<char>(kStoreOk)) {
    return absl::PermissionDeniedError(
        absl::StrCat("store at ", where, " refused this job's token (DDPIO_STORE_TOKEN differs?)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const std::string& host, int port, const std::string& token,
    std::chrono::milliseconds connect_timeout, const TcpStoreLimits& limits) {
  auto client = std::unique_ptr<TcpStoreClient>(new TcpStoreClient());
  client->where_ = absl::StrCat(host, ":", port);
  client->limits_ = limits;
  const auto deadline = Clock::now() + connect_timeout;
  std::minstd_rand jitter(std::random_device{}());
  auto pause = std::chrono::duration_cast<std::chrono::microseconds>(kFirstPause);
  absl::Status last;
  for (int attempt = 1;; ++attempt) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    absl::StatusOr<Fd> fd = internal::ConnectRetrying(
        host, port, std::max(left, std::chrono::milliseconds(1)), "rendezvous store");
    if (!fd.ok() && attempt == 1) return fd.status();  // nobody listening all along
    if (fd.ok()) {
      last = Hello(fd->get(), token, std::max(deadline, Clock::now() + kHelloPatience),
                   client->where_);
      if (last.ok()) {
        client->fd_ = std::move(fd).value();
        return client;
      }
      if (absl::IsPermissionDenied(last)) return last;
    } else {
      last = fd.status();
    }
    // Closed before the hello was answered: a store shedding a flood of connections, or one
    // that is restarting. Try again until the deadline.
    const auto sleep = pause / 2 + std::chrono::microseconds(jitter() % (pause.count() / 2 + 1));
    if (Clock::now() + sleep >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("store at ", client->where_, " did not take this rank's hello within ",
                       connect_timeout.count(), " ms (", attempt,
                       " connection(s) closed or failed before the hello was answered; the last: ",
                       last.message(), ")"));
    }
    std::this_thread::sleep_for(sleep);
    pause = std::min<std::chrono::microseconds>(pause * 2, kMaxPause);
  }
}

absl::StatusOr<std::string> TcpStoreClient::Call(const std::string& request,
                                                 std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(mu_);
  if (request.size() > limits_.max_message) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store request of ", request.size(), " bytes exceeds the limit of ", limits_.max_message));
  }
  const auto deadline = Clock::now() + wait + limits_.reply_timeout;
  absl::Status sent = internal::WriteFrame(fd_.get(), request, deadline);
  if (!sent.ok()) return Annotate(sent, absl::StrCat("store at ", where_));
  auto reply = internal::ReadFrame(fd_.get(), limits_.max_message, deadline);
  if (!reply.ok()) return Annotate(reply.status(), absl::StrCat("store at ", where_));
  if (reply->empty())
    return absl::DataLossError(absl::StrCat("empty reply from the store at ", where_));
  if ((*reply)[0] == static_cast<char>(kStoreError) ||
      (*reply)[0] == static_cast<char>(kStoreFull)) {
    ByteReader r(*reply);
    uint8_t tag = kStoreError;
    std::string message;
    r.Le(&tag);
    r.LengthPrefixed(&message);
    if (tag == kStoreFull) {  // refused for room; the connection is still good
      return absl::ResourceExhaustedError(absl::StrCat("store at ", where_, " is full: ", message));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("store at ", where_, " rejected the request: ", message));
  }
  return reply;
}

absl::Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  std::string req(1, static_cast<char>(kStoreSet));
  PutLengthPrefixed(&req, key);
  PutLengthPrefixed(&req, value);
  return Call(req, std::chrono::milliseconds(0)).status();
}

absl::Status TcpStoreClient::Wait(const std::vector<std::string>& keys,
                                  std::chrono::milliseconds timeout) {
  std::string req(1, static_cast<char>(kStoreWait));
  PutFixed32(&req, static_cast<uint32_t>(std::clamp<int64_t>(timeout.count(), 0, UINT32_MAX)));
  for (const auto& k : keys) PutLengthPrefixed(&req, k);
  absl::StatusOr<std::string> reply = Call(req, timeout);
  if (!reply.ok()) return reply.status();
  ByteReader r(*reply);
  uint8_t tag = kStoreOk;
  std::string missing;
  if (r.Le(&tag) && tag == kStoreTimedOut) {
    r.LengthPrefixed(&missing);
    return absl::DeadlineExceededError(absl::StrCat("store at ", where_, ": key '", missing,
                                                    "' not set within ", timeout.count(), " ms"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStoreClient::Get(const std::string& key,
                                                std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(Wait({key}, timeout));
  std::string req(1, static_cast<char>(kStoreGet));
  PutLengthPrefixed(&req, key);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  ByteReader r(*reply);
  uint8_t tag = 0;
  std::string value;
  if (!r.Le(&tag) || tag != kStoreOk || !r.LengthPrefixed(&value)) {
    return absl::DataLossError(
        absl::StrCat("store at ", where_, ": malformed reply to GET '", key, "'"));
  }
  return value;
}

absl::StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  std::string req(1, static_cast<char>(kStoreAdd));
  PutLengthPrefixed(&req, key);
  PutLe(&req, delta);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  ByteReader r(*reply);
  uint8_t tag = 0;
  int64_t value = 0;
  if (!r.Le(&tag) || !r.Le(&value)) return absl::DataLossError("malformed reply to ADD");
  return value;
}

absl::StatusOr<bool> TcpStoreClient::Check(const std::vector<std::string>& keys) {
  std::string req(1, static_cast<char>(kStoreCheck));
  for (const auto& k : keys) PutLengthPrefixed(&req, k);
  absl::StatusOr<std::string> reply = Call(req, std::chrono::milliseconds(0));
  if (!reply.ok()) return reply.status();
  return reply->size() >= 2 && (*reply)[1] == 1;
}

}  // namespace ddpio::comm
