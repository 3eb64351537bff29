// NodeSignal: what the clients of one node that talk to one store tell each other — that the store
// pushed back (503 SlowDown, 429, a timed-out attempt) and when — so that the node backs off as
// one: every client's governor (rate_governor.h) halves its rate when any of them is pushed back,
// and the node's rate, the sum of theirs, halves with it (one AIMD per node and endpoint, made of
// the processes' own). A node's ranks are separate processes, so the signal lives in a small file
// mapped into each (by default under /dev/shm, named by the user and the store's endpoint): the
// steady clock's time of the latest push-back, an atomic every process reads and writes.
//
// The file lives as long as a client uses it: each holds a shared lock (flock) on it, and the last
// to close it — the one that can take the lock exclusively — removes it, so nothing is left in
// /dev/shm after a job (a file left by a killed process goes when the next job's last client
// closes). A client that opened a file being removed opens the new one instead.
//
// Nothing in the file is trusted beyond that one time: a time in the future (a damaged or foreign
// file) is ignored and overwritten by the next push-back. A file that is not a regular file of
// this user (a symlink, a directory, another user's) is refused: Open's error names it, and a
// caller goes on without the signal. Thread-safe.
#ifndef DDPIO_STORAGE_S3_NODE_SIGNAL_H_
#define DDPIO_STORAGE_S3_NODE_SIGNAL_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace ddpio::storage::s3 {

class NodeSignal {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr char kDefaultDir[] = "/dev/shm";

  // The signal of the clients of this node talking to `key` (the store's endpoint), in `dir`,
  // made when missing. The file's path names the user and a hash of `key`.
  static absl::StatusOr<std::unique_ptr<NodeSignal>> Open(const std::string& key,
                                                          const std::string& dir = kDefaultDir);
  ~NodeSignal();
  NodeSignal(const NodeSignal&) = delete;
  NodeSignal& operator=(const NodeSignal&) = delete;

  // This client was pushed back at `now`.
  void Raise(Clock::time_point now);
  // The latest push-back of any client of the node, if one was raised and is not in the future
  // (more than a second past `now`: a damaged file).
  std::optional<Clock::time_point> Latest(Clock::time_point now) const;
  const std::string& path() const { return path_; }

 private:
  struct Shared;
  NodeSignal(std::string path, int fd, pid_t opener, Shared* shared)
      : path_(std::move(path)), fd_(fd), opener_(opener), shared_(shared) {}

  std::string path_;
  int fd_;          // open, holding the shared lock, until the destructor
  pid_t opener_;    // the process that opened it (a forked child never removes the file)
  Shared* shared_;  // the file's mapping
};

}  // namespace ddpio::storage::s3

#endif  // DDPIO_STORAGE_S3_NODE_SIGNAL_H_
