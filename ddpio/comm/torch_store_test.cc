// TorchStoreClient against (1) an in-test server speaking either wire protocol, to check the
// probe, the encoding and the failure paths, and (2) the real PyTorch TCPStore of the installed
// torch (a Python process), to check the bytes against the real thing.
#include "ddpio/comm/torch_store.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <thread>

#include "ddpio/comm/internal/socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/subprocess.h"

namespace ddpio::comm {
namespace {

using internal::Clock;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

// A minimal PyTorch-protocol server: one thread per connection, SET/GET/ADD/CHECK/WAIT. A
// current-protocol server treats a connection whose first message is not VALIDATE as PyTorch's
// do: the libuv server ignores it (no answer, connection kept), the classic one closes it.
class FakeTorchStore {
 public:
  explicit FakeTorchStore(TorchStoreProtocol protocol, bool close_unvalidated = false)
      : protocol_(protocol), close_unvalidated_(close_unvalidated) {
    auto fd = internal::Listen("127.0.0.1", 0, &port_);
    EXPECT_OK(fd);
    listener_ = std::move(fd).value();
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~FakeTorchStore() {
    stopping_ = true;
    ::shutdown(listener_.get(), SHUT_RDWR);
    changed_.notify_all();
    acceptor_.join();
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : clients_) t.join();
  }
  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  // A value the server will send for `key` whatever was set (to test the size limit).
  void SetRaw(const std::string& key, std::string value) {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = std::move(value);
    changed_.notify_all();
  }

 private:
  void AcceptLoop() {
    for (;;) {
      int fd = ::accept(listener_.get(), nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(fd);
      clients_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  bool Read(int fd, void* p, size_t n) {
    return ::recv(fd, p, n, MSG_WAITALL) == static_cast<ssize_t>(n);
  }
  bool ReadStr(int fd, std::string* s) {
    uint64_t n = 0;
    if (!Read(fd, &n, 8) || n > (1u << 20)) return false;
    s->resize(n);
    return n == 0 || Read(fd, s->data(), n);
  }
  void Write(int fd, const void* p, size_t n) { (void)::send(fd, p, n, MSG_NOSIGNAL); }
  void Serve(int fd) {
    const bool legacy = protocol_ == TorchStoreProtocol::kLegacy;
    const int shift = legacy ? 0 : 1;  // current = legacy + 1, VALIDATE is 0
    bool validated = legacy;
    for (;;) {
      uint8_t op = 0;
      if (!Read(fd, &op, 1)) break;
      if (!validated) {
        uint32_t magic = 0;
        if (op == 0 && Read(fd, &magic, 4) && magic == 0x3C85F7CE) {
          validated = true;
          continue;
        }
        if (close_unvalidated_) break;  // classic backend: an exception closes the socket
        continue;                       // libuv backend: ignored, no answer
      }
      if (legacy && op == 6) {  // GETNUMKEYS
        std::lock_guard<std::mutex> lock(mu_);
        int64_t n = static_cast<int64_t>(data_.size());
        Write(fd, &n, 8);
        continue;
      }
      int q = op - shift;
      std::string key, value;
      if (q == 0) {  // SET
        if (!ReadStr(fd, &key) || !ReadStr(fd, &value)) break;
        std::lock_guard<std::mutex> lock(mu_);
        data_[key] = value;
        changed_.notify_all();
      } else if (q == 2) {  // GET
        if (!ReadStr(fd, &key)) break;
        std::lock_guard<std::mutex> lock(mu_);
        auto it = data_.find(key);
        if (it == data_.end()) break;  // PyTorch drops the connection
        uint64_t n = it->second.size();
        Write(fd, &n, 8);
        Write(fd, it->second.data(), n);
      } else if (q == 3) {  // ADD
        int64_t delta = 0;
        if (!ReadStr(fd, &key) || !Read(fd, &delta, 8)) break;
        std::lock_guard<std::mutex> lock(mu_);
        int64_t v = (data_.count(key) ? std::stoll(data_[key]) : 0) + delta;
        data_[key] = std::to_string(v);
        changed_.notify_all();
        Write(fd, &v, 8);
      } else if (q == 4 || q == 5) {  // CHECK, WAIT
        uint64_t n = 0;
        if (!Read(fd, &n, 8) || n > 1000) break;
        std::vector<std::string> keys(n);
        for (auto& k : keys) {
          if (!ReadStr(fd, &k)) return;
        }
        std::unique_lock<std::mutex> lock(mu_);
        auto all = [&] {
          for (auto& k : keys) {
            if (!data_.count(k)) return false;
          }
          return true;
        };
        if (q == 4) {
          uint8_t r = all() ? 0 : 1;
          Write(fd, &r, 1);
        } else {
          changed_.wait(lock, [&] { return stopping_.load() || all(); });
          if (stopping_) break;
          uint8_t r = 0;
          Write(fd, &r, 1);
        }
      } else {
        break;
      }
    }
  }

  const TorchStoreProtocol protocol_;
  const bool close_unvalidated_;
  internal::Fd listener_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
  std::vector<std::thread> clients_;
  std::vector<int> fds_;
};

TorchStoreOptions Quick(TorchStoreProtocol p = TorchStoreProtocol::kAuto) {
  TorchStoreOptions o;
  o.protocol = p;
  o.connect_timeout = milliseconds(5000);
  o.probe_timeout = milliseconds(300);
  return o;
}

void ExerciseStore(Store& s) {
  ASSERT_OK(s.Set("a", std::string("x\0y", 3)));
  auto a = s.Get("a", milliseconds(1000));
  ASSERT_OK(a);
  EXPECT_EQ(*a, std::string("x\0y", 3));
  EXPECT_EQ(*s.Add("n", 5), 5);
  EXPECT_EQ(*s.Add("n", -2), 3);
  EXPECT_EQ(*s.Get("n", milliseconds(1000)), "3");  // counters are decimal text, as in PyTorch
  EXPECT_TRUE(*s.Check({"a", "n"}));
  EXPECT_FALSE(*s.Check({"a", "missing"}));
  ASSERT_OK(s.Wait({"a", "n"}, milliseconds(1000)));
}

TEST(TorchStore, DetectsEitherProtocolAndSpeaksIt) {
  struct Case {
    TorchStoreProtocol protocol;
    bool close_unvalidated;
  };
  for (Case c :
       {Case{TorchStoreProtocol::kLegacy, false}, Case{TorchStoreProtocol::kCurrent, false},
        Case{TorchStoreProtocol::kCurrent, true}}) {
    FakeTorchStore server(c.protocol, c.close_unvalidated);
    auto client = TorchStoreClient::Connect("127.0.0.1", server.port(), Quick());
    ASSERT_OK(client);
    EXPECT_EQ((*client)->protocol(), c.protocol);
    ExerciseStore(**client);
  }
}

TEST(TorchStore, AnExplicitProtocolSkipsTheProbe) {
  FakeTorchStore server(TorchStoreProtocol::kCurrent);
  const auto t0 = Clock::now();
  auto client =
      TorchStoreClient::Connect("127.0.0.1", server.port(), Quick(TorchStoreProtocol::kCurrent));
  ASSERT_OK(client);
  ExerciseStore(**client);
  EXPECT_EQ(server.connections(), 1);  // no probe connection
  EXPECT_LT(Clock::now() - t0, milliseconds(300));
}

TEST(TorchStore, AWaitThatTimesOutNamesTheKeyAndTheClientRecovers) {
  FakeTorchStore server(TorchStoreProtocol::kLegacy);
  auto client = TorchStoreClient::Connect("127.0.0.1", server.port(), Quick());
  ASSERT_OK(client);
  auto missing = (*client)->Get("never", milliseconds(200));
  EXPECT_CODE(missing, kDeadlineExceeded);
  EXPECT_THAT(missing.status().message(), HasSubstr("'never'"));
  const int before = server.connections();
  ExerciseStore(**client);  // on a new connection: the old one is out of step
  EXPECT_EQ(server.connections(), before + 1);
}

TEST(TorchStore, AnOversizedValueIsDataLossNotAnAllocation) {
  FakeTorchStore server(TorchStoreProtocol::kLegacy);
  server.SetRaw("/big", std::string(2000, 'b'));  // keys carry PyTorch's "/" on the wire
  TorchStoreOptions o = Quick();
  o.max_value = 1000;
  auto client = TorchStoreClient::Connect("127.0.0.1", server.port(), o);
  ASSERT_OK(client);
  auto big = (*client)->Get("big", milliseconds(1000));
  EXPECT_CODE(big, kDataLoss);
  EXPECT_THAT(big.status().message(), HasSubstr("2000 bytes"));
}

TEST(TorchStore, NoServerIsDeadlineExceededNamingTheStore) {
  int port = 0;
  { auto fd = internal::Listen("127.0.0.1", 0, &port); }  // free, nobody listens
  TorchStoreOptions o = Quick();
  o.connect_timeout = milliseconds(300);
  auto client = TorchStoreClient::Connect("127.0.0.1", port, o);
  EXPECT_CODE(client, kDeadlineExceeded);
  EXPECT_THAT(client.status().message(), HasSubstr("PyTorch TCPStore"));
  EXPECT_CODE(ParseTorchStoreProtocol("v2"), kInvalidArgument);
}

#ifdef DDPIO_TORCH_PYTHON
// The installed PyTorch's own TCPStore server (a Python process): ddpio's client sets, adds and
// reads keys; Python checks what ddpio wrote and writes what ddpio reads.
TEST(TorchStore, InteroperatesWithTheInstalledPyTorch) {
  int port = 0;
  { auto fd = internal::Listen("127.0.0.1", 0, &port); }
  const std::string script = R"(
import sys, datetime, torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), None, True, datetime.timedelta(seconds=30), wait_for_workers=False)
s.set("from_python", "hello ddpio")
s.wait(["from_ddpio", "done"])
assert s.get("from_ddpio") == b"bytes\x00from ddpio", s.get("from_ddpio")
assert s.add("counter", 0) == 42, s.get("counter")
print("python saw", s.get("from_ddpio"), flush=True)
s.set("python_checked", "1")
s.wait(["bye"])
)";
  std::thread python([&] {
    ddpio::testing::RunOptions ro;
    ro.timeout = std::chrono::seconds(60);
    auto r = ddpio::testing::Run({DDPIO_TORCH_PYTHON, "-c", script, std::to_string(port)}, ro);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("python saw"));
  });
  TorchStoreOptions o;
  o.connect_timeout = milliseconds(30000);
  auto client = TorchStoreClient::Connect("127.0.0.1", port, o);
  EXPECT_OK(client);
  if (client.ok()) {
    Store& s = **client;
    EXPECT_EQ(*s.Get("from_python", milliseconds(20000)), "hello ddpio");
    EXPECT_OK(s.Set("from_ddpio", std::string("bytes\0from ddpio", 16)));
    EXPECT_EQ(*s.Add("counter", 40), 40);
    EXPECT_EQ(*s.Add("counter", 2), 42);
    EXPECT_OK(s.Set("done", ""));
    EXPECT_OK(s.Wait({"python_checked"}, milliseconds(20000)));
    EXPECT_TRUE(*s.Check({"from_python", "python_checked"}));
    EXPECT_OK(s.Set("bye", "1"));
  }
  python.join();
}
#endif

}  // namespace
}  // namespace ddpio::comm
