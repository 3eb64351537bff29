#include "ddpio/comm/liveness.h"

#include <future>
#include <memory>
#include <vector>

#include "ddpio/comm/tcp_store.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace ddpio::comm {
namespace {

using std::chrono::milliseconds;
constexpr char kToken[] = "liveness-token";
constexpr milliseconds kPeriod(100);

// Each rank its own client of one store, as ranks of a job are.
std::shared_ptr<Store> Client(int port) {
  auto c = TcpStoreClient::Connect("127.0.0.1", port, kToken, milliseconds(5000));
  EXPECT_OK(c);
  return c.ok() ? std::shared_ptr<Store>(std::move(c).value()) : nullptr;
}

std::vector<std::unique_ptr<Heartbeat>> Beats(int port, int world) {
  std::vector<std::unique_ptr<Heartbeat>> beats;
  for (int r = 0; r < world; ++r) {
    beats.push_back(std::make_unique<Heartbeat>(Client(port), Client(port), r, world,
                                                "10.0.0." + std::to_string(r / 2 + 1),
                                                "tcp://127.0.0.1, served by rank 0", kPeriod));
  }
  return beats;
}

TEST(Liveness, PeriodIsATwentiethOfTheTimeoutWithinBounds) {
  EXPECT_EQ(HeartbeatPeriod(milliseconds(20000)), milliseconds(1000));
  EXPECT_EQ(HeartbeatPeriod(milliseconds(1000)), milliseconds(250));
  EXPECT_EQ(HeartbeatPeriod(milliseconds(600000)), milliseconds(5000));
}

TEST(Liveness, EveryRankAnsweringNamesNobody) {
  ASSERT_OK_AND_ASSIGN(auto server, TcpStoreServer::Start("127.0.0.1", 0, kToken));
  auto beats = Beats(server->port(), 3);
  Census c = beats[1]->Take();
  EXPECT_TRUE(c.vanished.empty()) << c.line;
  EXPECT_FALSE(c.store_lost);
  EXPECT_EQ(c.line, "");
  // A census in healthy times leaves nothing behind that would answer a later one.
  beats[2].reset();
  c = beats[0]->Take();
  EXPECT_EQ(c.vanished, std::vector<int>{2}) << c.line;
  EXPECT_NE(c.line.find("rank 2 (10.0.0.2) stopped answering: its heartbeat"), std::string::npos)
      << c.line;
}

// A store that does not give one key (as when the rank serving it leaves between two lookups).
class WithoutKey : public Store {
 public:
  WithoutKey(std::shared_ptr<Store> inner, std::string key)
      : inner_(std::move(inner)), key_(std::move(key)) {}
  absl::Status Set(const std::string& key, const std::string& value) override {
    return inner_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override {
    if (key == key_) return absl::UnavailableError("connection reset by peer");
    return inner_->Get(key, timeout);
  }
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override {
    return inner_->Wait(keys, timeout);
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    return inner_->Add(key, delta);
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    return inner_->Check(keys);
  }

 private:
  std::shared_ptr<Store> inner_;
  std::string key_;
};

TEST(Liveness, AnAddressTheStoreDoesNotGiveIsSaidToBeTheStoresNotLeftAsAQuestionMark) {
  ASSERT_OK_AND_ASSIGN(auto server, TcpStoreServer::Start("127.0.0.1", 0, kToken));
  auto beats = Beats(server->port(), 4);
  beats[2].reset();
  beats[3].reset();
  Heartbeat asker(std::make_shared<WithoutKey>(Client(server->port()), "live/addr/3"),
                  Client(server->port()), 0, 4, "10.0.0.1", "tcp://127.0.0.1, served by rank 0",
                  kPeriod);
  beats[0].reset();  // the asker takes rank 0's place
  Census c = asker.Take();
  EXPECT_EQ(c.vanished, (std::vector<int>{2, 3})) << c.line;
  EXPECT_NE(c.line.find("rank 2 (10.0.0.2)"), std::string::npos) << c.line;
  EXPECT_NE(c.line.find("the job's store (tcp://127.0.0.1, served by rank 0) did not give the "
                        "address of rank 3: connection reset by peer"),
            std::string::npos)
      << c.line;
}

TEST(Liveness, TheRanksWhoseHeartbeatStoppedAreNamedWithTheirAddress) {
  ASSERT_OK_AND_ASSIGN(auto server, TcpStoreServer::Start("127.0.0.1", 0, kToken));
  auto beats = Beats(server->port(), 6);
  // Ranks 2 and 3 (node 10.0.0.2) vanish.
  beats[2].reset();
  beats[3].reset();
  // Every survivor asks at once, as ranks failing on the same collective do: one counts, the
  // others take its verdict — and all name the same ranks.
  std::vector<std::future<Census>> asked;
  for (int r : {0, 1, 4, 5}) {
    asked.push_back(std::async(std::launch::async, [&beats, r] { return beats[r]->Take(); }));
  }
  for (auto& f : asked) {
    Census c = f.get();
    EXPECT_EQ(c.vanished, (std::vector<int>{2, 3})) << c.line;
    EXPECT_FALSE(c.store_lost);
    EXPECT_EQ(c.addresses[2], "10.0.0.2");
    EXPECT_NE(c.line.find("ranks 2, 3 (10.0.0.2) stopped answering"), std::string::npos) << c.line;
  }
  // One census: the counter of askers says four asked, and the verdict was posted once.
  auto store = std::make_shared<PrefixStore>("live", Client(server->port()));
  ASSERT_OK_AND_ASSIGN(int64_t askers, store->Add("census/taker/0", 0));
  EXPECT_EQ(askers, 4);
  ASSERT_OK_AND_ASSIGN(std::string verdict, store->Get("census/verdict/0", milliseconds(100)));
  EXPECT_EQ(verdict, "2,3");
}

TEST(Liveness, ALostStoreIsSaidWithoutWaitingOnIt) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, kToken);
  ASSERT_OK(server);
  auto beats = Beats((*server)->port(), 2);
  server->reset();  // the store's host is gone
  EXPECT_FALSE(beats[1]->store_silent()) << "just beaten";
  Census c = beats[1]->Take();
  EXPECT_TRUE(c.store_lost) << c.line;
  EXPECT_TRUE(c.vanished.empty());
  EXPECT_NE(c.line.find("the job's store (tcp://127.0.0.1, served by rank 0)"), std::string::npos)
      << c.line;
}

}  // namespace
}  // namespace ddpio::comm
