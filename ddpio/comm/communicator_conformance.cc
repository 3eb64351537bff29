#include "ddpio/comm/communicator_conformance.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "ddpio/comm/group_layout.h"
#include "ddpio/comm/tcp_store.h"
#include "gtest/gtest.h"
#include "tests/support/multiprocess.h"
#include "tests/support/status_matchers.h"

namespace ddpio::comm::testing {
namespace {

using std::chrono::milliseconds;
constexpr char kToken[] = "conformance-token";
const milliseconds kTimeout(20000);

template <typename T>
T* Buffer(Communicator& c, size_t count, std::vector<std::shared_ptr<uint8_t>>* keep) {
  auto b = c.Allocate(count * sizeof(T));
  if (!b.ok()) return nullptr;
  keep->push_back(*b);
  return reinterpret_cast<T*>(b->get());
}

int Collectives(Communicator& c, int rank, int world) {
  std::vector<std::shared_ptr<uint8_t>> keep;
  // Broadcast from the last rank.
  uint8_t* b = Buffer<uint8_t>(c, 1000, &keep);
  if (b == nullptr) return 20;
  for (int i = 0; i < 1000; ++i) b[i] = rank == world - 1 ? static_cast<uint8_t>(7 + i) : 0;
  if (!c.Broadcast(b, 1000, world - 1, kTimeout).ok()) return 2;
  for (int i = 0; i < 1000; ++i)
    if (b[i] != static_cast<uint8_t>(7 + i)) return 3;
  // Scatter from rank 0: rank i gets 64 bytes of value i + 1.
  uint8_t* parts = Buffer<uint8_t>(c, 64 * world, &keep);
  uint8_t* mine = Buffer<uint8_t>(c, 64, &keep);
  std::vector<const void*> ptrs;
  for (int i = 0; i < world; ++i) {
    std::memset(parts + 64 * i, i + 1, 64);
    ptrs.push_back(parts + 64 * i);
  }
  std::memset(mine, 0, 64);
  if (!c.Scatter(rank == 0 ? ptrs : std::vector<const void*>{}, mine, 64, 0, kTimeout).ok())
    return 4;
  for (int i = 0; i < 64; ++i)
    if (mine[i] != rank + 1) return 5;
  // All-reduce: sum and average.
  float* f = Buffer<float>(c, 1000, &keep);
  std::fill(f, f + 1000, static_cast<float>(rank + 1));
  if (!c.AllReduce(f, 1000, ReduceOp::kSum, kTimeout).ok()) return 6;
  for (int i = 0; i < 1000; ++i)
    if (f[i] != world * (world + 1) / 2.0f) return 7;
  float* g = Buffer<float>(c, 10, &keep);
  std::fill(g, g + 10, static_cast<float>(rank));
  if (!c.AllReduce(g, 10, ReduceOp::kAverage, kTimeout).ok()) return 8;
  for (int i = 0; i < 10; ++i)
    if (std::fabs(g[i] - (world - 1) / 2.0f) > 1e-6f) return 9;
  // All-gather.
  int32_t* me = Buffer<int32_t>(c, 1, &keep);
  int32_t* all = Buffer<int32_t>(c, world, &keep);
  *me = rank * 10;
  std::fill(all, all + world, -1);
  if (!c.AllGather(me, all, sizeof(int32_t), kTimeout).ok()) return 10;
  for (int i = 0; i < world; ++i)
    if (all[i] != i * 10) return 11;
  // Point to point around a ring (even ranks send first, so it cannot deadlock).
  if (world > 1) {
    uint64_t* out = Buffer<uint64_t>(c, 1, &keep);
    uint64_t* in = Buffer<uint64_t>(c, 1, &keep);
    *out = 1000 + rank;
    *in = 0;
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    if (rank % 2 == 0) {
      if (!c.Send(out, sizeof(*out), next, 5, kTimeout).ok()) return 12;
      if (!c.Recv(in, sizeof(*in), prev, 5, kTimeout).ok()) return 13;
    } else {
      if (!c.Recv(in, sizeof(*in), prev, 5, kTimeout).ok()) return 13;
      if (!c.Send(out, sizeof(*out), next, 5, kTimeout).ok()) return 12;
    }
    if (*in != static_cast<uint64_t>(1000 + prev)) return 14;
  }
  // A pipelined chain 0 -> 1 -> ... -> world-1: chunked, the size not a multiple of the chunk.
  if (world > 1) {
    constexpr size_t kBytes = 10007, kChunk = 1000;
    uint8_t* chain = Buffer<uint8_t>(c, kBytes, &keep);
    for (size_t i = 0; i < kBytes; ++i) chain[i] = rank == 0 ? static_cast<uint8_t>(i * 31 + 7) : 0;
    absl::Status st;
    if (rank == 0) {
      st = c.SendChunked(chain, kBytes, kChunk, 1, 9, kTimeout);
    } else if (rank < world - 1) {
      st = c.RecvForward(chain, kBytes, kChunk, rank - 1, rank + 1, 9, kTimeout);
    } else {
      st = c.RecvChunked(chain, kBytes, kChunk, rank - 1, 9, kTimeout);
    }
    if (!st.ok()) return 16;
    for (size_t i = 0; i < kBytes; ++i)
      if (chain[i] != static_cast<uint8_t>(i * 31 + 7)) return 17;
    if (c.SendChunked(chain, kBytes, 0, (rank + 1) % world, 9, kTimeout).code() !=
        absl::StatusCode::kInvalidArgument) {
      return 18;
    }
  }
  if (!c.Barrier(kTimeout).ok()) return 15;
  return 0;
}

}  // namespace

std::vector<int> RunRanks(int world, const std::string& job,
                          const std::function<int(int, std::shared_ptr<Store>)>& body,
                          std::chrono::seconds limit, const std::function<void()>& after_fork) {
  const int port = ddpio::testing::FreeLoopbackPort();
  std::unique_ptr<TcpStoreServer> server;
  return ddpio::testing::RunForked(
      world,
      [&](int rank) {
        auto client = TcpStoreClient::Connect("127.0.0.1", port, kToken, kTimeout);
        if (!client.ok()) return 100;
        return body(rank, std::make_shared<PrefixStore>(
                              job, std::shared_ptr<Store>(std::move(client).value())));
      },
      limit,
      [&] {
        if (after_fork) after_fork();
        auto started = TcpStoreServer::Start("127.0.0.1", port, kToken);
        EXPECT_OK(started);
        if (started.ok()) server = std::move(started).value();
      });
}

void ExpectCollectivesCorrect(const CommFactory& make) {
  for (int world = 1; world <= 4; ++world) {
    auto codes = RunRanks(world, "collectives-" + std::to_string(world),
                          [&](int rank, std::shared_ptr<Store> store) {
                            auto comm = make(store, rank, world, kTimeout);
                            if (!comm.ok()) return 1;
                            return Collectives(**comm, rank, world);
                          });
    for (int r = 0; r < world; ++r) EXPECT_EQ(codes[r], 0) << "world " << world << " rank " << r;
  }
}

void ExpectGroupsWork(const CommFactory& make) {
  for (auto kind : {LayoutKind::kContiguous, LayoutKind::kStrided}) {
    auto codes =
        RunRanks(4, "groups-" + LayoutKindName(kind), [&](int rank, std::shared_ptr<Store> store) {
          auto layout = GroupLayout::Make(4, 2, kind);
          if (!layout.ok()) return 1;
          const int g = layout->group_rank(rank);
          auto comm = make(std::make_shared<PrefixStore>("group-" + std::to_string(g), store),
                           layout->local_group_rank(rank), layout->group_size(), kTimeout);
          if (!comm.ok()) return 2;
          std::vector<std::shared_ptr<uint8_t>> keep;
          float* v = Buffer<float>(**comm, 1, &keep);
          *v = static_cast<float>(rank);
          if (!(*comm)->AllReduce(v, 1, ReduceOp::kSum, kTimeout).ok()) return 3;
          float want = 0;
          for (int m : layout->members(rank)) want += static_cast<float>(m);
          return *v == want ? 0 : 4;
        });
    for (int r = 0; r < 4; ++r) EXPECT_EQ(codes[r], 0) << LayoutKindName(kind) << " rank " << r;
  }
}

void ExpectKilledPeerGivesUnavailable(const CommFactory& make) {
  auto codes = RunRanks(3, "killed", [&](int rank, std::shared_ptr<Store> store) {
    auto comm = make(store, rank, 3, kTimeout);
    if (!comm.ok()) return 1;
    if (!(*comm)->Barrier(kTimeout).ok()) return 2;
    if (rank == 2) raise(SIGKILL);
    std::vector<std::shared_ptr<uint8_t>> keep;
    float* v = Buffer<float>(**comm, 1 << 16, &keep);
    std::fill(v, v + (1 << 16), 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = (*comm)->AllReduce(v, 1 << 16, ReduceOp::kSum, milliseconds(15000));
    const auto took = std::chrono::steady_clock::now() - t0;
    if (s.code() != absl::StatusCode::kUnavailable) return 3;
    if (took > std::chrono::seconds(10)) return 4;
    // Later calls fail at once, naming the first error.
    if ((*comm)->Barrier(milliseconds(1000)).code() != absl::StatusCode::kFailedPrecondition)
      return 5;
    return 0;
  });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[2], 200 + SIGKILL);
}

void ExpectStalledPeerGivesDeadlineExceeded(const CommFactory& make) {
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  auto codes = RunRanks(
      2, "stalled",
      [&](int rank, std::shared_ptr<Store> store) {
        auto comm = make(store, rank, 2, kTimeout);
        if (!comm.ok()) return 1;
        if (!(*comm)->Barrier(kTimeout).ok()) return 2;
        if (rank == 1) {
          close(hold[1]);
          char c;
          ssize_t n = read(hold[0], &c, 1);  // EOF only when rank 0 (the last writer) has exited
          (void)n;
          return 0;
        }
        close(hold[0]);
        std::vector<std::shared_ptr<uint8_t>> keep;
        float* v = Buffer<float>(**comm, 1, &keep);
        *v = 1;
        const auto t0 = std::chrono::steady_clock::now();
        absl::Status s = (*comm)->AllReduce(v, 1, ReduceOp::kSum, milliseconds(700));
        if (s.code() != absl::StatusCode::kDeadlineExceeded) return 3;
        return std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10) ? 0 : 4;
      },
      std::chrono::seconds(60),
      [&] {  // the test process holds neither end
        close(hold[0]);
        close(hold[1]);
      });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

void ExpectMissingPeerFailsCreate(const CommFactory& make) {
  auto codes = RunRanks(1, "missing", [&](int rank, std::shared_ptr<Store> store) {
    auto comm = make(store, rank, 2, milliseconds(800));  // rank 1 never comes
    return comm.status().code() == absl::StatusCode::kDeadlineExceeded ? 0 : 1;
  });
  EXPECT_EQ(codes[0], 0);
}

void ExpectAbortPoisons(const CommFactory& make) {
  auto codes = RunRanks(1, "abort", [&](int rank, std::shared_ptr<Store> store) {
    auto comm = make(store, rank, 1, kTimeout);
    if (!comm.ok()) return 1;
    if (!(*comm)->Barrier(kTimeout).ok()) return 2;
    (*comm)->Abort();
    return (*comm)->Barrier(kTimeout).code() == absl::StatusCode::kFailedPrecondition ? 0 : 3;
  });
  EXPECT_EQ(codes[0], 0);
}

std::vector<int> RunJob(int world, RendezvousOptions options,
                        const std::function<int(Job&)>& body) {
  const int port = ddpio::testing::FreeLoopbackPort();
  return ddpio::testing::RunForked(world, [&](int rank) {
    auto info = DiscoverRank({{"RANK", std::to_string(rank)},
                              {"WORLD_SIZE", std::to_string(world)},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", std::to_string(port)}});
    if (!info.ok()) return 100;
    auto job = Job::Join(*info, options);
    if (!job.ok()) {
      std::fprintf(stderr, "join: %s\n", job.status().ToString().c_str());
      return 101;
    }
    int code = body(**job);
    job->reset();
    return code;
  });
}

int JobWorldAndGroups(Job& job) {
  std::vector<std::shared_ptr<uint8_t>> keep;
  float* v = Buffer<float>(job.world(), 1, &keep);
  *v = 1;
  if (!job.world().AllReduce(v, 1, ReduceOp::kSum, kTimeout).ok()) return 1;
  if (*v != static_cast<float>(job.info().world_size)) return 2;
  for (auto kind : {LayoutKind::kContiguous, LayoutKind::kStrided}) {
    auto layout = GroupLayout::Make(job.info().world_size, 2, kind);
    if (!layout.ok()) return 3;
    auto group = job.Group(*layout);
    if (!group.ok()) return 4;
    if ((*group)->backend() != job.world().backend()) return 7;
    float* r = Buffer<float>(**group, 1, &keep);
    *r = static_cast<float>(job.info().rank);
    if (!(*group)->AllReduce(r, 1, ReduceOp::kSum, kTimeout).ok()) return 5;
    float want = 0;
    for (int m : layout->members(job.info().rank)) want += static_cast<float>(m);
    if (*r != want) return 6;
  }
  return 0;
}

}  // namespace ddpio::comm::testing
