// ddpio's rendezvous store, server side: whatever a client sends — with or without the token
// first — the server answers or drops that connection and keeps serving the others. One server
// for the whole run; every input is one connection's bytes, then a probe by a real client that
// must still be served.
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "ddpio/comm/internal/socket.h"
#include "ddpio/comm/tcp_store.h"

namespace {

using ddpio::comm::TcpStoreClient;
using ddpio::comm::TcpStoreLimits;
using ddpio::comm::TcpStoreServer;
namespace internal = ddpio::comm::internal;

constexpr char kToken[] = "fuzz-token";

struct World {
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<TcpStoreClient> probe;
  World() {
    TcpStoreLimits limits;
    limits.max_message = 1 << 16;
    limits.hello_timeout = std::chrono::milliseconds(200);
    server = std::move(TcpStoreServer::Start("127.0.0.1", 0, kToken, limits)).value();
    probe = std::move(TcpStoreClient::Connect("127.0.0.1", server->port(), kToken,
                                              std::chrono::seconds(5)))
                .value();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();
  const auto deadline = internal::Clock::now() + std::chrono::milliseconds(200);
  auto fd = internal::Connect("127.0.0.1", world->server->port(), deadline);
  if (!fd.ok()) __builtin_trap();  // the server stopped accepting
  // Half the inputs start authenticated, so the fuzzer reaches the operations too.
  std::string bytes;
  if (size > 0 && (data[0] & 1)) {
    const std::string hello = std::string("DDPS1") + kToken;
    const uint32_t n = static_cast<uint32_t>(hello.size());
    bytes.append(reinterpret_cast<const char*>(&n), 4);
    bytes += hello;
  }
  if (size > 0) bytes.append(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)internal::WriteAll(fd->get(), bytes.data(), bytes.size(), deadline);
  ::shutdown(fd->get(), SHUT_WR);
  char sink[4096];
  while (::recv(fd->get(), sink, sizeof(sink), 0) > 0) {
  }
  // Whatever that connection did, a rank is still served.
  if (!world->probe->Set("probe", "ok").ok()) __builtin_trap();
  auto v = world->probe->Get("probe", std::chrono::seconds(5));
  if (!v.ok() || *v != "ok") __builtin_trap();
  return 0;
}
