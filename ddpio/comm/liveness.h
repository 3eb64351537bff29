// Which ranks of a job still answer, so that a rank failing on a lost peer can name it.
//
// A collective that times out says only that it timed out ("Timed out waiting 20000ms for
// recv"): in a ring or a tree the rank it waited on may itself be waiting on the lost one. So
// every rank keeps a heartbeat on the job's store — a background thread adds 1 to its counter
// every `period` — and after a failure one rank (the first to ask) reads every counter twice,
// 2.5 periods apart, and posts the verdict: the ranks whose counters stood still are the ones
// that vanished (a killed process, a lost node, a cut link). The others read the verdict: one
// census costs the store 2 × world requests however many ranks fail. A census that finds
// everyone answering ends its round, so a later one counts afresh. When the store itself has
// stopped answering (its host, rank 0 or torchrun's agent, is gone), the census says so without
// asking it.
//
//   Heartbeat beat(store, rank, world, address, "rank 0 at 10.0.0.1:29500", period);
//   ... a collective fails ...
//   Census c = beat.Take();  // c.line: "ranks 2, 3 (node 10.0.0.3) stopped answering ..."
#ifndef DDPIO_COMM_LIVENESS_H_
#define DDPIO_COMM_LIVENESS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "ddpio/comm/store.h"

namespace ddpio::comm {

struct Census {
  std::vector<int> vanished;             // ranks whose heartbeat stood still, ascending
  std::map<int, std::string> addresses;  // the address each of them advertised
  bool store_lost = false;               // the store stopped answering: its host is gone
  std::string line;                      // the finding in one sentence, "" when all answer
};

// The heartbeat's period for a job whose waits time out after `timeout`: a twentieth of it,
// between 250 ms and 5 s (a census then adds at most an eighth of the timeout to a failure).
std::chrono::milliseconds HeartbeatPeriod(std::chrono::milliseconds timeout);

class Heartbeat {
 public:
  // Starts beating at once. `store` is the job's and `beats` a connection of its own to the same
  // store, used for nothing else: a request parked on a shared connection (a group's rendezvous
  // waiting for its members) must not stop the beats of a rank that lives. A prefix of their own
  // is used on both. `address` is this rank's advertised address; `store_host` names the store's
  // host for the store-lost sentence.
  Heartbeat(std::shared_ptr<Store> store, std::shared_ptr<Store> beats, int rank, int world,
            std::string address, std::string store_host, std::chrono::milliseconds period);
  ~Heartbeat();  // stops the thread (within one store request)
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // After a failure: which ranks stopped answering. Takes about 2.5 periods for the rank that
  // counts (the others wait for its verdict); never fails — what it could not find out is said
  // in `line`.
  Census Take();

  std::chrono::milliseconds period() const { return period_; }
  // The store has not acknowledged a beat for over 3 periods + 1 s: its host is gone. A rank
  // leaving then does not wait on it (each request would wait out the store's timeout).
  bool store_silent() const;

 private:
  void Run();
  Census Count(int64_t round);  // reads the counters and posts the round's verdict
  Census Describe(const std::string& verdict);
  Census StoreLost(const absl::Status& why) const;  // the store's host gone; `why` when known

  const std::shared_ptr<Store> store_, beats_;
  const int rank_, world_;
  const std::string store_host_;
  const std::chrono::milliseconds period_;
  std::atomic<int64_t> last_ok_ns_;  // steady clock of the last beat the store acknowledged
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_LIVENESS_H_
