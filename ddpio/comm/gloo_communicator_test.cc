// The Gloo backend against the backend conformance suite: real processes over loopback, each
// rank a forked child meeting the others through a TcpStoreServer run by the test process.
#include "ddpio/comm/gloo_communicator.h"

#include <signal.h>

#include "ddpio/comm/communicator_conformance.h"
#include "gtest/gtest.h"

namespace ddpio::comm {
namespace {

absl::StatusOr<std::unique_ptr<Communicator>> MakeGloo(std::shared_ptr<Store> store, int rank,
                                                       int size,
                                                       std::chrono::milliseconds timeout) {
  GlooOptions o;
  o.timeout = timeout;
  auto comm = GlooCommunicator::Create(std::move(store), rank, size, o);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Communicator>(std::move(comm).value());
}

TEST(GlooCommunicator, CollectivesAreCorrectForWorldSizesOneToFour) {
  testing::ExpectCollectivesCorrect(MakeGloo);
}
TEST(GlooCommunicator, GroupsInBothLayouts) { testing::ExpectGroupsWork(MakeGloo); }
TEST(GlooCommunicator, KilledPeerGivesUnavailableFast) {
  testing::ExpectKilledPeerGivesUnavailable(MakeGloo);
}
TEST(GlooCommunicator, StalledPeerGivesDeadlineExceeded) {
  testing::ExpectStalledPeerGivesDeadlineExceeded(MakeGloo);
}
TEST(GlooCommunicator, MissingPeerFailsTheConnectAfterTheTimeout) {
  testing::ExpectMissingPeerFailsCreate(MakeGloo);
}
TEST(GlooCommunicator, AbortPoisonsTheCommunicator) { testing::ExpectAbortPoisons(MakeGloo); }
TEST(GlooCommunicator, BuffersAreHostMemory) {
  auto codes = testing::RunRanks(1, "memory", [](int rank, std::shared_ptr<Store> store) {
    auto comm = MakeGloo(store, rank, 1, std::chrono::seconds(20));
    return comm.ok() && !(*comm)->device_memory() && (*comm)->backend() == "gloo" ? 0 : 1;
  });
  EXPECT_EQ(codes[0], 0);
}

// Gloo writes with write(2): without this a peer's death would kill the process by SIGPIPE
// (the killed-peer tests failed intermittently so). A handler the program set stays.
void CountPipe(int) {}
TEST(GlooCommunicator, SigpipeIsIgnoredUnlessTheProgramHandlesIt) {
  for (bool own_handler : {false, true}) {
    auto codes = testing::RunRanks(
        1, own_handler ? "handler" : "default", [&](int rank, std::shared_ptr<Store> store) {
          ::signal(SIGPIPE, own_handler ? CountPipe : SIG_DFL);
          auto comm = MakeGloo(store, rank, 1, std::chrono::seconds(20));
          if (!comm.ok()) return 1;
          struct sigaction now {};
          ::sigaction(SIGPIPE, nullptr, &now);
          return now.sa_handler == (own_handler ? CountPipe : SIG_IGN) ? 0 : 2;
        });
    EXPECT_EQ(codes[0], 0) << "own handler " << own_handler;
  }
}

}  // namespace
}  // namespace ddpio::comm
