// torchrun's agent store (PyTorch's TCPStore) as the client sees it: a server answering every
// request with whatever bytes the input holds. The client must turn them into values or errors —
// never a crash, never an allocation the reply merely claims, never a hang past its deadline.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "ddpio/comm/internal/socket.h"
#include "ddpio/comm/torch_store.h"

namespace {

namespace internal = ddpio::comm::internal;

// A server that answers each connection with the current reply bytes, then closes it.
struct FakeStore {
  internal::Fd listener;
  int port = 0;
  std::mutex mu;
  std::string reply;  // guarded by mu
  FakeStore() {
    listener = std::move(internal::Listen("127.0.0.1", 0, &port)).value();
    std::thread([this] {
      for (;;) {
        const int fd = ::accept(listener.get(), nullptr, nullptr);
        if (fd < 0) continue;
        std::string r;
        {
          std::lock_guard<std::mutex> lock(mu);
          r = reply;
        }
        char sink[4096];
        (void)::recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        (void)internal::WriteAll(fd, r.data(), r.size(),
                                 internal::Clock::now() + std::chrono::milliseconds(100));
        ::shutdown(fd, SHUT_WR);
        while (::recv(fd, sink, sizeof(sink), 0) > 0) {
        }
        ::close(fd);
      }
    }).detach();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FakeStore* store = new FakeStore();
  {
    std::lock_guard<std::mutex> lock(store->mu);
    store->reply.assign(reinterpret_cast<const char*>(data), size);
  }
  ddpio::comm::TorchStoreOptions o;
  o.protocol = size > 0 && (data[0] & 1) ? ddpio::comm::TorchStoreProtocol::kCurrent
                                         : ddpio::comm::TorchStoreProtocol::kLegacy;
  o.connect_timeout = std::chrono::milliseconds(300);
  o.max_value = 1 << 20;
  auto client = ddpio::comm::TorchStoreClient::Connect("127.0.0.1", store->port, o);
  if (!client.ok()) return 0;
  const auto t = std::chrono::milliseconds(50);
  auto v = (*client)->Get("key", t);
  if (v.ok() && v->size() > o.max_value) __builtin_trap();
  (void)(*client)->Add("counter", 1);
  (void)(*client)->Check({"a", "b"});
  (void)(*client)->Wait({"a"}, t);
  (void)(*client)->Set("k", "v");
  return 0;
}
