// The rendezvous store: a small key-value service every rank reaches before any collective.
//
// Keys are written once per job (a per-job prefix keeps an earlier run's keys from being read
// as this run's); Get and Wait block until the keys exist or the timeout passes (then
// DeadlineExceeded naming the missing key); Add is an atomic counter (the value is the decimal
// text of an int64). Implementations: TcpStoreClient (tcp_store.h; served by rank 0),
// FileStore (a shared directory), PrefixStore (a namespace over another store). All are
// thread-safe.
#ifndef DDPIO_COMM_STORE_H_
#define DDPIO_COMM_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpio::comm {

class Store {
 public:
  virtual ~Store() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for it to be set.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          std::chrono::milliseconds timeout) = 0;
  // Returns when every key exists; DeadlineExceeded (naming a missing key) after `timeout`.
  virtual absl::Status Wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer at `key` (0 when absent) and returns the new value.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // Whether every key exists now (no waiting).
  virtual absl::StatusOr<bool> Check(const std::vector<std::string>& keys) = 0;
};

// Every key of `base` prefixed with `prefix` + "/": a namespace per job or per group.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : prefix_(std::move(prefix) + "/"), base_(std::move(base)) {}
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;

 private:
  std::vector<std::string> Prefixed(const std::vector<std::string>& keys) const;
  const std::string prefix_;
  const std::shared_ptr<Store> base_;
};

// Keys as files in a directory on a filesystem every rank shares (NFS, Lustre, a local dir for
// one node). Values are written to a temporary file and renamed, so a reader never sees half a
// value; Add takes an flock on the key's lock file. Waiting polls with a growing interval (up to
// 50 ms). The directory is created if missing.
class FileStore : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(const std::string& dir);
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;

 private:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(const std::string& key) const;
  const std::string dir_;
};

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_STORE_H_
