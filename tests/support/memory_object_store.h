// An object store in memory for tests (s3/object_store.h): buckets of objects with ETags, ranged
// reads, conditional PUTs, multipart uploads and credentials, shared by every client opened on its
// endpoint "memory://NAME" — so the remote reader, its cache and the upload are tested without a
// gateway. Faults on demand (AddFault): an error answer (503 SlowDown, 429, a reset — retried as
// the S3 client retries them, within its RetryPolicy's attempts — or one retries cannot mend), a
// damaged body, a body of the wrong length, a delay. Every answer comes on the caller's thread,
// asynchronous ones before GetRangeAsync returns (the interface allows it; a test sees one order
// of events, not a race). The real gateway's tests (label s3) keep running.
//
//   auto store = testing::MemoryStore::Create();
//   s3::S3Config config = store->Config();           // endpoint memory://NAME
//   store->AddFault({.method = "GET", .key_contains = "data.mdb", .times = 3,
//                    .status = absl::UnavailableError("HTTP 503 SlowDown")});
//   ReaderOptions o;
//   o.store_overrides.s3 = config;
//   DatasetReader::Open("s3://bucket/train", o);
//
// Thread-safe.
#ifndef DDPIO_TESTS_SUPPORT_MEMORY_OBJECT_STORE_H_
#define DDPIO_TESTS_SUPPORT_MEMORY_OBJECT_STORE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "ddpio/storage/s3/object_store.h"

namespace ddpio::testing {

// What a fault does to the requests it matches (method and key), `times` of them (-1: all).
struct StoreFault {
  std::string method;        // "GET", "HEAD", "PUT", "POST", "DELETE"; "" any
  std::string key_contains;  // "" any key
  int times = 1;
  // The answer is this error. Unavailable, DeadlineExceeded and ResourceExhausted (503, a reset,
  // a timeout, 429) are retried within the client's RetryPolicy, each match costing an attempt;
  // other codes are final.
  absl::Status status;
  bool flip_byte = false;  // the body comes back with one byte changed (a store's damage)
  int64_t body_delta = 0;  // the body comes back this many bytes longer or shorter
  std::chrono::milliseconds delay{0};  // the answer comes this much later
};

class MemoryStore {
 public:
  // A new empty store at "memory://NAME" (a unique name when empty), with credentials of its
  // own. Lives while a client or the caller holds it.
  static std::shared_ptr<MemoryStore> Create(std::string name = "");

  // The configuration of a client of this store (endpoint, region, its credentials).
  storage::s3::S3Config Config() const;
  const std::string& name() const { return name_; }

  void AddFault(StoreFault fault);
  void ClearFaults();

  // What the store holds, bypassing every fault (for checks and for damaging it on purpose).
  std::optional<std::string> Object(const std::string& bucket, const std::string& key) const;
  void SetObject(const std::string& bucket, const std::string& key, std::string bytes);
  std::vector<std::string> Keys(const std::string& bucket) const;
  // Requests answered (retried attempts each counted), by method ("" any) and key ("" any).
  uint64_t requests(const std::string& method = "", const std::string& key_contains = "") const;
  // The ranges asked for by GETs of a key containing `key_contains`, in the order asked
  // (first attempts only): {offset, length}.
  std::vector<std::pair<uint64_t, uint64_t>> Ranges(const std::string& key_contains) const;

  // The store's side of a request, for its clients (memory_object_store.cc). `attempts` is how
  // many attempts a matching retryable fault may take before the error is final.
  struct Answer {
    absl::Status status = absl::OkStatus();
    std::string body, etag;
    uint64_t size = 0;
    int attempts = 1;
    std::chrono::milliseconds delay{0};
  };
  struct Request {
    std::string method, bucket, key;
    std::string query;  // "uploads", "uploadId=..", "partNumber=..&uploadId=.."
    std::string body, if_match;
    bool if_none_match = false;
    bool has_range = false;
    uint64_t offset = 0, length = 0;
    std::string access_key, secret_key;
  };
  Answer Serve(const Request& request, int max_attempts);

 private:
  explicit MemoryStore(std::string name);
  struct Stored {
    std::string bytes, etag;
  };
  struct Multipart {
    std::string bucket, key;
    std::map<int, Stored> parts;
  };
  Answer Handle(const Request& r);                        // under mu_
  std::optional<StoreFault> TakeFault(const Request& r);  // under mu_
  std::string NextEtag();                                 // under mu_

  const std::string name_;
  const std::string access_key_, secret_key_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, Stored>> buckets_;  // guarded by mu_
  std::map<std::string, Multipart> uploads_;                      // guarded by mu_
  std::vector<StoreFault> faults_;                                // guarded by mu_
  // Guarded by mu_; by method and key.
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;
  struct AskedRange {
    std::string key;
    uint64_t offset, length;
  };
  std::vector<AskedRange> ranges_;  // guarded by mu_
  uint64_t next_id_ = 0;            // guarded by mu_
};

}  // namespace ddpio::testing

#endif  // DDPIO_TESTS_SUPPORT_MEMORY_OBJECT_STORE_H_
