// The behaviour every Communicator backend must show, as test bodies run against a factory:
// gloo_communicator_test.cc runs them on GlooCommunicator, tests/gpu_standin on the NCCL
// backend linked against the stand-in. Each forks real rank processes that meet through a
// TcpStoreServer of the test process and talk over loopback.
//
// Buffers come from Communicator::Allocate and are read and written by the host: right for
// Gloo and for the stand-in (whose "device" memory is host memory), not for a real GPU.
#ifndef DDPIO_COMM_COMMUNICATOR_CONFORMANCE_H_
#define DDPIO_COMM_COMMUNICATOR_CONFORMANCE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/comm/store.h"

namespace ddpio::comm::testing {

// Creates rank `rank` of `size` over `store` (already namespaced), connecting within `timeout`.
using CommFactory = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(
    std::shared_ptr<Store> store, int rank, int size, std::chrono::milliseconds timeout)>;

// Forks `world` ranks running body(rank, store) (exit code 0 = pass) that meet through a
// TcpStoreServer this process starts after forking (the children's connects are retried).
std::vector<int> RunRanks(int world, const std::string& job,
                          const std::function<int(int, std::shared_ptr<Store>)>& body,
                          std::chrono::seconds limit = std::chrono::seconds(60),
                          const std::function<void()>& after_fork = {});

// Broadcast, scatter, all-reduce (sum, average), all-gather, send/recv around a ring, a chunked
// chain (SendChunked -> RecvForward ... -> RecvChunked) and a barrier give the right values for
// worlds of 1 to 4 ranks.
void ExpectCollectivesCorrect(const CommFactory& make);
// Every rank creates its group's communicator (contiguous and strided groups of 2 in a world
// of 4) under a prefix per group; a reduction stays within the group.
void ExpectGroupsWork(const CommFactory& make);
// A peer SIGKILLed mid-run: the others get Unavailable well within their timeout, then
// FailedPrecondition from any later call.
void ExpectKilledPeerGivesUnavailable(const CommFactory& make);
// A peer alive but not taking part: DeadlineExceeded after the operation's timeout.
void ExpectStalledPeerGivesDeadlineExceeded(const CommFactory& make);
// A rank that never arrives: creating the communicator fails with DeadlineExceeded.
void ExpectMissingPeerFailsCreate(const CommFactory& make);
// Abort() makes every later call fail with FailedPrecondition, without touching peers.
void ExpectAbortPoisons(const CommFactory& make);

// Forks `world` ranks that Join a job (torchrun-style environment, TCP store on a free port
// unless options say otherwise) and run `body`; returns exit codes.
std::vector<int> RunJob(int world, RendezvousOptions options, const std::function<int(Job&)>& body);
// Body for RunJob: an all-reduce over the world, then in two group layouts (contiguous and
// strided, groups of 2) created in the same order on every rank; 0 when every sum is right.
int JobWorldAndGroups(Job& job);

}  // namespace ddpio::comm::testing

#endif  // DDPIO_COMM_COMMUNICATOR_CONFORMANCE_H_
