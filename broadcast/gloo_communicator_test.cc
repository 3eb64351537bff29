// Real processes over loopback: each rank is a forked child that meets the others through a
// TcpStoreServer run by the test process, then runs collectives through GlooCommunicator.
#include "broadcast/gloo_communicator.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <numeric>

#include "broadcast/tcp_store.h"
#include "gtest/gtest.h"
#include "sampler/group_layout.h"
#include "tests/support/multiprocess.h"
#include "tests/support/status_matchers.h"

namespace ddpio::broadcast {
namespace {

using std::chrono::milliseconds;
constexpr char kToken[] = "gloo-test-token";

// Forks `world` ranks running body(rank, store) (exit code 0 = pass) that meet through a
// TcpStoreServer this process starts after forking (the children's connects are retried).
std::vector<int> RunRanks(int world, const std::string& job,
                          const std::function<int(int, std::shared_ptr<Store>)>& body,
                          std::chrono::seconds limit = std::chrono::seconds(60),
                          const std::function<void()>& after_fork = {}) {
  const int port = testing::FreeLoopbackPort();
  std::unique_ptr<TcpStoreServer> server;
  return testing::RunForked(
      world,
      [&](int rank) {
        auto client = TcpStoreClient::Connect("127.0.0.1", port, kToken, milliseconds(20000));
        if (!client.ok()) return 100;
        return body(rank, std::make_shared<PrefixStore>(job, std::shared_ptr<Store>(std::move(client).value())));
      },
      limit,
      [&] {
        if (after_fork) after_fork();
        auto started = TcpStoreServer::Start("127.0.0.1", port, kToken);
        EXPECT_OK(started);
        if (started.ok()) server = std::move(started).value();
      });
}

int Collectives(int rank, std::shared_ptr<Store> store, int world) {
  GlooOptions o;
  o.timeout = milliseconds(20000);
  auto comm = GlooCommunicator::Create(store, rank, world, o);
  if (!comm.ok()) return 1;
  Communicator& c = **comm;
  const milliseconds t(20000);
  // Broadcast from the last rank.
  std::vector<uint8_t> b(1000, 0);
  if (rank == world - 1) std::iota(b.begin(), b.end(), 7);
  if (!c.Broadcast(b.data(), b.size(), world - 1, t).ok()) return 2;
  for (size_t i = 0; i < b.size(); ++i) if (b[i] != static_cast<uint8_t>(7 + i)) return 3;
  // Scatter from rank 0: rank i gets 64 bytes of value i + 1.
  std::vector<std::vector<uint8_t>> parts(world);
  std::vector<const void*> ptrs;
  for (int i = 0; i < world; ++i) {
    parts[i].assign(64, static_cast<uint8_t>(i + 1));
    ptrs.push_back(parts[i].data());
  }
  std::vector<uint8_t> mine(64, 0);
  if (!c.Scatter(rank == 0 ? ptrs : std::vector<const void*>{}, mine.data(), 64, 0, t).ok()) return 4;
  for (uint8_t v : mine) if (v != rank + 1) return 5;
  // All-reduce: sum and average.
  std::vector<float> f(1000, static_cast<float>(rank + 1));
  if (!c.AllReduce(f.data(), f.size(), ReduceOp::kSum, t).ok()) return 6;
  for (float v : f) if (v != world * (world + 1) / 2.0f) return 7;
  std::vector<float> g(10, static_cast<float>(rank));
  if (!c.AllReduce(g.data(), g.size(), ReduceOp::kAverage, t).ok()) return 8;
  for (float v : g) if (std::fabs(v - (world - 1) / 2.0f) > 1e-6f) return 9;
  // All-gather.
  int32_t me = rank * 10;
  std::vector<int32_t> all(world, -1);
  if (!c.AllGather(&me, all.data(), sizeof(me), t).ok()) return 10;
  for (int i = 0; i < world; ++i) if (all[i] != i * 10) return 11;
  // Point to point around a ring.
  if (world > 1) {
    uint64_t out = 1000 + rank, in = 0;
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    if (rank % 2 == 0) {
      if (!c.Send(&out, sizeof(out), next, 5, t).ok()) return 12;
      if (!c.Recv(&in, sizeof(in), prev, 5, t).ok()) return 13;
    } else {
      if (!c.Recv(&in, sizeof(in), prev, 5, t).ok()) return 13;
      if (!c.Send(&out, sizeof(out), next, 5, t).ok()) return 12;
    }
    if (in != static_cast<uint64_t>(1000 + prev)) return 14;
  }
  if (!c.Barrier(t).ok()) return 15;
  return 0;
}

TEST(GlooCommunicator, CollectivesAreCorrectForWorldSizesOneToFour) {
  for (int world = 1; world <= 4; ++world) {
    auto codes = RunRanks(world, "collectives-" + std::to_string(world),
                          [world](int rank, std::shared_ptr<Store> store) { return Collectives(rank, store, world); });
    for (int r = 0; r < world; ++r) EXPECT_EQ(codes[r], 0) << "world " << world << " rank " << r;
  }
}

// Every rank creates its group's communicator in the same order, under a prefix per group, and
// reduces within the group only.
TEST(GlooCommunicator, GroupsInBothLayouts) {
  for (auto kind : {sampler::LayoutKind::kContiguous, sampler::LayoutKind::kStrided}) {
    auto codes = RunRanks(4, "groups-" + sampler::LayoutKindName(kind), [kind](int rank, std::shared_ptr<Store> store) {
      auto layout = sampler::GroupLayout::Make(4, 2, kind);
      if (!layout.ok()) return 1;
      const int g = layout->group_rank(rank);
      auto group_store = std::make_shared<PrefixStore>("group-" + std::to_string(g), store);
      auto comm = GlooCommunicator::Create(group_store, layout->local_group_rank(rank), layout->group_size());
      if (!comm.ok()) return 2;
      float v = static_cast<float>(rank);
      if (!(*comm)->AllReduce(&v, 1, ReduceOp::kSum, milliseconds(20000)).ok()) return 3;
      float want = 0;
      for (int m : layout->members(rank)) want += static_cast<float>(m);
      return v == want ? 0 : 4;
    });
    for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[r], 0) << sampler::LayoutKindName(kind) << " rank " << r;
  }
}

// A peer killed mid-run: the others get Unavailable well within their timeout and exit cleanly.
TEST(GlooCommunicator, KilledPeerGivesUnavailableFast) {
  auto codes = RunRanks(3, "killed", [](int rank, std::shared_ptr<Store> store) {
    auto comm = GlooCommunicator::Create(store, rank, 3);
    if (!comm.ok()) return 1;
    if (!(*comm)->Barrier(milliseconds(20000)).ok()) return 2;
    if (rank == 2) raise(SIGKILL);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> v(1 << 16, 1.0f);
    absl::Status s = (*comm)->AllReduce(v.data(), v.size(), ReduceOp::kSum, milliseconds(15000));
    const auto took = std::chrono::steady_clock::now() - t0;
    if (s.code() != absl::StatusCode::kUnavailable) return 3;
    if (took > std::chrono::seconds(10)) return 4;
    // Later calls fail at once, naming the first error.
    if ((*comm)->Barrier(milliseconds(1000)).code() != absl::StatusCode::kFailedPrecondition) return 5;
    return 0;
  });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], 200 + SIGKILL);
}

// A stalled peer (alive, not participating): DeadlineExceeded after the operation's timeout.
TEST(GlooCommunicator, StalledPeerGivesDeadlineExceeded) {
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  auto codes = RunRanks(
      2, "stalled",
      [&](int rank, std::shared_ptr<Store> store) {
        auto comm = GlooCommunicator::Create(store, rank, 2);
        if (!comm.ok()) return 1;
        if (!(*comm)->Barrier(milliseconds(20000)).ok()) return 2;
        if (rank == 1) {
          close(hold[1]);
          char c;
          ssize_t n = read(hold[0], &c, 1);  // EOF only when rank 0 (the last writer) has exited
          (void)n;
          return 0;
        }
        close(hold[0]);
        float v = 1;
        absl::Status s = (*comm)->AllReduce(&v, 1, ReduceOp::kSum, milliseconds(700));
        return s.code() == absl::StatusCode::kDeadlineExceeded ? 0 : 3;
      },
      std::chrono::seconds(60),
      [&] {  // the test process holds neither end
        close(hold[0]);
        close(hold[1]);
      });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

TEST(GlooCommunicator, MissingPeerFailsTheConnectAfterTheTimeout) {
  auto codes = RunRanks(1, "missing", [](int rank, std::shared_ptr<Store> store) {
    GlooOptions o;
    o.timeout = milliseconds(800);
    auto comm = GlooCommunicator::Create(store, rank, 2, o);  // rank 1 never comes
    return comm.status().code() == absl::StatusCode::kDeadlineExceeded ? 0 : 1;
  });
  EXPECT_EQ(codes[0], 0);
}

}  // namespace
}  // namespace ddpio::broadcast
