#include "tests/support/memory_object_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::testing {
namespace {

using storage::s3::HttpCounters;
using storage::s3::ObjectStore;
using storage::s3::S3ClientOptions;
using storage::s3::S3Config;

constexpr char kScheme[] = "memory";

bool Retryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsResourceExhausted(s);
}

// How a request is named in messages, as the S3 client names it.
std::string What(const MemoryStore::Request& r) {
  std::string what = absl::StrCat(r.method, " ", ObjectStore::Name(r.bucket, r.key));
  if (r.has_range) absl::StrAppend(&what, " bytes=", r.offset, "-", r.offset + r.length - 1);
  return what;
}

std::mutex stores_mu;
std::map<std::string, std::weak_ptr<MemoryStore>>& Stores() {  // guarded by stores_mu
  static auto* stores = new std::map<std::string, std::weak_ptr<MemoryStore>>();
  return *stores;
}

// A client of a MemoryStore: every request answered at once on the caller's thread, asynchronous
// ones too (before GetRangeAsync returns: a test sees one order of events, not a race).
class MemoryClient : public ObjectStore {
 public:
  MemoryClient(std::shared_ptr<MemoryStore> store, S3Config config, S3ClientOptions options)
      : store_(std::move(store)), config_(std::move(config)), options_(std::move(options)) {}

  absl::StatusOr<std::string> Get(const std::string& bucket, const std::string& key,
                                  uint64_t max_bytes) override {
    DDPIO_ASSIGN_OR_RETURN(Object o, GetObject(bucket, key, max_bytes));
    return std::move(o.body);
  }
  absl::StatusOr<std::string> GetRange(const std::string& bucket, const std::string& key,
                                       uint64_t offset, uint64_t length) override {
    if (length == 0) return std::string();
    return Range(Make("GET", bucket, key, offset, length));
  }
  void GetRangeAsync(const std::string& bucket, const std::string& key, uint64_t offset,
                     uint64_t length, RangeDone done) override {
    done(GetRange(bucket, key, offset, length));
  }
  absl::StatusOr<Object> GetObject(const std::string& bucket, const std::string& key,
                                   uint64_t max_bytes) override {
    MemoryStore::Answer a = Call(Make("GET", bucket, key));
    if (!a.status.ok()) return a.status;
    if (a.body.size() > max_bytes) {
      return absl::DataLossError(absl::StrCat("GET ", Name(bucket, key),
                                              ": the response is larger than the ", max_bytes,
                                              " bytes expected"));
    }
    return Object{std::move(a.body), std::move(a.etag)};
  }
  absl::StatusOr<uint64_t> Size(const std::string& bucket, const std::string& key) override {
    MemoryStore::Answer a = Call(Make("HEAD", bucket, key));
    if (!a.status.ok()) return a.status;
    return a.size;
  }
  absl::StatusOr<ObjectInfo> Head(const std::string& bucket, const std::string& key) override {
    MemoryStore::Answer a = Call(Make("HEAD", bucket, key));
    if (!a.status.ok()) return a.status;
    return ObjectInfo{a.size, std::move(a.etag)};
  }
  absl::Status Put(const std::string& bucket, const std::string& key, std::string body) override {
    return PutWithEtag(bucket, key, std::move(body)).status();
  }
  absl::StatusOr<std::string> PutConditional(const std::string& bucket, const std::string& key,
                                             std::string body,
                                             const std::string& if_match) override {
    MemoryStore::Request r = Make("PUT", bucket, key);
    r.body = std::move(body);
    r.if_match = if_match;
    r.if_none_match = if_match.empty();
    MemoryStore::Answer a = Call(std::move(r));
    if (!a.status.ok()) return a.status;
    return std::move(a.etag);
  }
  absl::StatusOr<std::string> PutWithEtag(const std::string& bucket, const std::string& key,
                                          std::string body) override {
    MemoryStore::Request r = Make("PUT", bucket, key);
    r.body = std::move(body);
    MemoryStore::Answer a = Call(std::move(r));
    if (!a.status.ok()) return a.status;
    return std::move(a.etag);
  }
  absl::Status Delete(const std::string& bucket, const std::string& key) override {
    return Call(Make("DELETE", bucket, key)).status;
  }
  absl::Status CreateBucket(const std::string& bucket) override {
    return Call(Make("PUT", bucket, "")).status;
  }
  absl::StatusOr<std::string> CreateMultipartUpload(const std::string& bucket,
                                                    const std::string& key) override {
    MemoryStore::Request r = Make("POST", bucket, key);
    r.query = "uploads";
    MemoryStore::Answer a = Call(std::move(r));
    if (!a.status.ok()) return a.status;
    return std::move(a.body);
  }
  absl::StatusOr<std::string> UploadPart(const std::string& bucket, const std::string& key,
                                         const std::string& upload_id, int part,
                                         std::string body) override {
    MemoryStore::Request r = Make("PUT", bucket, key);
    r.query = absl::StrCat("partNumber=", part, "&uploadId=", upload_id);
    r.body = std::move(body);
    MemoryStore::Answer a = Call(std::move(r));
    if (!a.status.ok()) return a.status;
    return std::move(a.etag);
  }
  absl::StatusOr<std::string> CompleteMultipartUpload(
      const std::string& bucket, const std::string& key, const std::string& upload_id,
      const std::vector<std::pair<int, std::string>>& parts) override {
    MemoryStore::Request r = Make("POST", bucket, key);
    r.query = absl::StrCat("uploadId=", upload_id);
    for (const auto& [number, etag] : parts) absl::StrAppend(&r.body, number, " ", etag, "\n");
    MemoryStore::Answer a = Call(std::move(r));
    if (!a.status.ok()) return a.status;
    return std::move(a.etag);
  }
  absl::StatusOr<std::vector<Part>> ListParts(const std::string& bucket, const std::string& key,
                                              const std::string& upload_id) override {
    MemoryStore::Request r = Make("GET", bucket, key);
    r.query = absl::StrCat("uploadId=", upload_id);
    MemoryStore::Answer a = Call(std::move(r));
    if (!a.status.ok()) return a.status;
    std::vector<Part> parts;  // the body: "number size etag" lines
    size_t at = 0;
    while (at < a.body.size()) {
      const size_t end = a.body.find('\n', at);
      const std::string line = a.body.substr(at, end - at);
      at = end + 1;
      Part p;
      const size_t s1 = line.find(' '), s2 = line.find(' ', s1 + 1);
      p.number = std::stoi(line.substr(0, s1));
      p.size = std::stoull(line.substr(s1 + 1, s2 - s1 - 1));
      p.etag = line.substr(s2 + 1);
      parts.push_back(std::move(p));
    }
    return parts;
  }

  HttpCounters counters() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }
  const S3Config& config() const override { return config_; }

 private:
  MemoryStore::Request Make(const std::string& method, const std::string& bucket,
                            const std::string& key) const {
    MemoryStore::Request r;
    r.method = method;
    r.bucket = bucket;
    r.key = key;
    r.access_key = config_.access_key;
    r.secret_key = config_.secret_key;
    return r;
  }
  MemoryStore::Request Make(const std::string& method, const std::string& bucket,
                            const std::string& key, uint64_t offset, uint64_t length) const {
    MemoryStore::Request r = Make(method, bucket, key);
    r.has_range = true;
    r.offset = offset;
    r.length = length;
    return r;
  }

  absl::StatusOr<std::string> Range(const MemoryStore::Request& r) {
    MemoryStore::Answer a = Call(r);
    if (!a.status.ok()) return a.status;
    if (a.body.size() != r.length) {
      return absl::DataLossError(absl::StrCat(What(r), ": ", a.body.size(),
                                              " bytes came back for a range of ", r.length,
                                              " (HTTP 206)"));
    }
    return std::move(a.body);
  }

  // The store's answer, its attempts counted as the S3 client counts them.
  MemoryStore::Answer Call(const MemoryStore::Request& r) {
    const RetryPolicy& p = options_.retry;
    // A retry budget in time (give_up_after) retries however many attempts it takes: here up to
    // a bound no test's faults reach.
    const int attempts = p.give_up_after.count() > 0 ? 1000 : std::max(1, p.max_attempts);
    if (p.cancel != nullptr && p.cancel->load()) {
      MemoryStore::Answer a;
      a.status =
          absl::CancelledError("interrupted: the request was given up (RetryPolicy::cancel)");
      return a;
    }
    MemoryStore::Answer a = store_->Serve(r, attempts);
    if (a.delay.count() > 0) std::this_thread::sleep_for(a.delay);  // the store's latency
    std::lock_guard<std::mutex> lock(mu_);
    counts_.requests += static_cast<uint64_t>(a.attempts);
    counts_.retries += static_cast<uint64_t>(a.attempts - 1);
    if (a.status.ok()) {
      counts_.bytes_received += a.body.size();
      counts_.bytes_sent += r.body.size();
    } else {
      ++counts_.failed;
    }
    return a;
  }

  using RetryPolicy = storage::s3::RetryPolicy;
  const std::shared_ptr<MemoryStore> store_;
  const S3Config config_;
  const S3ClientOptions options_;
  mutable std::mutex mu_;
  HttpCounters counts_;  // guarded by mu_
};

absl::StatusOr<std::unique_ptr<ObjectStore>> OpenMemoryClient(const S3Config& config,
                                                              const S3ClientOptions& options) {
  const std::string name = config.endpoint.substr(std::string(kScheme).size() + 3);
  std::shared_ptr<MemoryStore> store;
  {
    std::lock_guard<std::mutex> lock(stores_mu);
    auto it = Stores().find(name);
    if (it != Stores().end()) store = it->second.lock();
  }
  if (store == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("object store ", config.endpoint, ": no such in-memory store"));
  }
  return std::unique_ptr<ObjectStore>(new MemoryClient(std::move(store), config, options));
}

}  // namespace

std::shared_ptr<MemoryStore> MemoryStore::Create(std::string name) {
  static std::once_flag registered;
  std::call_once(registered, [] { storage::s3::RegisterObjectStore(kScheme, OpenMemoryClient); });
  static std::atomic<uint64_t> counter{0};
  if (name.empty()) name = absl::StrCat("store-", ::getpid(), "-", counter++);
  auto store = std::shared_ptr<MemoryStore>(new MemoryStore(name));
  std::lock_guard<std::mutex> lock(stores_mu);
  Stores()[name] = store;
  return store;
}

MemoryStore::MemoryStore(std::string name)
    : name_(std::move(name)),
      access_key_("MEMORYKEY" + name_),
      secret_key_("memory-secret-of-" + name_) {}

S3Config MemoryStore::Config() const {
  S3Config c;
  c.endpoint = absl::StrCat(kScheme, "://", name_);
  c.region = "us-east-1";
  c.access_key = access_key_;
  c.secret_key = secret_key_;
  c.credentials_from = "the test's in-memory store";
  return c;
}

void MemoryStore::AddFault(StoreFault fault) {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.push_back(std::move(fault));
}

void MemoryStore::ClearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.clear();
}

std::optional<std::string> MemoryStore::Object(const std::string& bucket,
                                               const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto b = buckets_.find(bucket);
  if (b == buckets_.end()) return std::nullopt;
  auto o = b->second.find(key);
  if (o == b->second.end()) return std::nullopt;
  return o->second.bytes;
}

void MemoryStore::SetObject(const std::string& bucket, const std::string& key, std::string bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  buckets_[bucket][key] = Stored{std::move(bytes), NextEtag()};
}

std::vector<std::string> MemoryStore::Keys(const std::string& bucket) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  auto b = buckets_.find(bucket);
  if (b != buckets_.end()) {
    for (const auto& [key, _] : b->second) keys.push_back(key);
  }
  return keys;
}

uint64_t MemoryStore::requests(const std::string& method, const std::string& key_contains) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [mk, count] : requests_) {
    if ((method.empty() || mk.first == method) &&
        (key_contains.empty() || mk.second.find(key_contains) != std::string::npos)) {
      n += count;
    }
  }
  return n;
}

std::vector<std::pair<uint64_t, uint64_t>> MemoryStore::Ranges(
    const std::string& key_contains) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const AskedRange& r : ranges_) {
    if (absl::StrContains(r.key, key_contains)) out.emplace_back(r.offset, r.length);
  }
  return out;
}

std::string MemoryStore::NextEtag() {
  return absl::StrCat("\"", absl::Hex(++next_id_, absl::kZeroPad16), "\"");
}

std::optional<StoreFault> MemoryStore::TakeFault(const Request& r) {
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (!it->method.empty() && it->method != r.method) continue;
    if (!it->key_contains.empty() && !absl::StrContains(r.key, it->key_contains)) continue;
    StoreFault f = *it;
    if (it->times > 0 && --it->times == 0) faults_.erase(it);
    return f;
  }
  return std::nullopt;
}

MemoryStore::Answer MemoryStore::Serve(const Request& r, int max_attempts) {
  std::lock_guard<std::mutex> lock(mu_);
  if (r.method == "GET" && r.has_range) ranges_.push_back({r.key, r.offset, r.length});
  Answer a;
  for (a.attempts = 1;; ++a.attempts) {
    ++requests_[{r.method, r.key}];
    std::optional<StoreFault> fault = TakeFault(r);
    if (fault.has_value() && !fault->status.ok()) {
      if (Retryable(fault->status) && a.attempts < max_attempts) continue;
      a.status = absl::Status(fault->status.code(),
                              absl::StrCat(What(r), ": ", fault->status.message(), " (", a.attempts,
                                           a.attempts > 1 ? " attempts)" : " attempt)"));
      return a;
    }
    Answer served = Handle(r);
    served.attempts = a.attempts;
    if (fault.has_value() && served.status.ok()) {
      served.delay = fault->delay;
      if (fault->flip_byte && !served.body.empty()) served.body[served.body.size() / 2] ^= 0x20;
      if (fault->body_delta > 0) served.body.append(static_cast<size_t>(fault->body_delta), 'z');
      if (fault->body_delta < 0) {
        served.body.resize(
            served.body.size() -
            std::min<size_t>(served.body.size(), static_cast<size_t>(-fault->body_delta)));
      }
    }
    return served;
  }
}

MemoryStore::Answer MemoryStore::Handle(const Request& r) {
  Answer a;
  const std::string what = What(r);
  if (r.access_key != access_key_ || r.secret_key != secret_key_) {
    a.status = absl::PermissionDeniedError(absl::StrCat(
        what, ": HTTP 403 SignatureDoesNotMatch: the request signature does not match"));
    return a;
  }
  auto bucket = buckets_.find(r.bucket);
  if (r.key.empty()) {  // the bucket itself: PUT creates it
    if (r.method == "PUT") buckets_[r.bucket];
    return a;
  }
  if (bucket == buckets_.end()) {
    a.status = absl::NotFoundError(absl::StrCat(what, ": HTTP 404 NoSuchBucket"));
    return a;
  }
  auto& objects = bucket->second;
  auto object = objects.find(r.key);
  if (r.method == "POST" && r.query == "uploads") {
    const std::string id = absl::StrCat("upload-", ++next_id_);
    uploads_[id] = Multipart{r.bucket, r.key, {}};
    a.body = id;
    return a;
  }
  if (absl::StartsWith(r.query, "uploadId=") || absl::StrContains(r.query, "&uploadId=")) {
    const std::string id = r.query.substr(r.query.find("uploadId=") + 9);
    auto up = uploads_.find(id);
    if (up == uploads_.end() || up->second.bucket != r.bucket || up->second.key != r.key) {
      a.status = absl::NotFoundError(absl::StrCat(what, ": HTTP 404 NoSuchUpload"));
      return a;
    }
    if (r.method == "PUT") {  // a part
      const int number = std::stoi(r.query.substr(11));
      a.etag = NextEtag();
      up->second.parts[number] = Stored{r.body, a.etag};
      return a;
    }
    if (r.method == "GET") {  // the parts held
      for (const auto& [number, part] : up->second.parts)
        absl::StrAppend(&a.body, number, " ", part.bytes.size(), " ", part.etag, "\n");
      return a;
    }
    // POST: completion, with "number etag" lines naming the parts in order.
    std::string bytes;
    size_t at = 0;
    while (at < r.body.size()) {
      const size_t end = r.body.find('\n', at);
      const std::string line = r.body.substr(at, end - at);
      at = end + 1;
      const int number = std::stoi(line.substr(0, line.find(' ')));
      const std::string etag = line.substr(line.find(' ') + 1);
      auto part = up->second.parts.find(number);
      if (part == up->second.parts.end() || part->second.etag != etag) {
        a.status = absl::InvalidArgumentError(absl::StrCat(what, ": HTTP 400 InvalidPart"));
        return a;
      }
      bytes += part->second.bytes;
    }
    a.etag = NextEtag();
    objects[r.key] = Stored{std::move(bytes), a.etag};
    uploads_.erase(up);
    return a;
  }
  if (r.method == "PUT") {
    const bool exists = object != objects.end();
    if ((r.if_none_match && exists) ||
        (!r.if_match.empty() && (!exists || object->second.etag != r.if_match))) {
      a.status = absl::FailedPreconditionError(absl::StrCat(what, ": HTTP 412 PreconditionFailed"));
      return a;
    }
    a.etag = NextEtag();
    objects[r.key] = Stored{r.body, a.etag};
    return a;
  }
  if (r.method == "DELETE") {  // (S3 answers 204 whether or not it was there)
    if (object != objects.end()) objects.erase(object);
    return a;
  }
  if (object == objects.end()) {
    a.status = absl::NotFoundError(absl::StrCat(what, ": HTTP 404 NoSuchKey"));
    return a;
  }
  const Stored& s = object->second;
  a.etag = s.etag;
  a.size = s.bytes.size();
  if (r.method == "HEAD") return a;
  if (!r.has_range) {
    a.body = s.bytes;
    return a;
  }
  if (r.offset >= s.bytes.size()) {
    a.status = absl::OutOfRangeError(absl::StrCat(what, ": HTTP 416 InvalidRange"));
    return a;
  }
  a.body = s.bytes.substr(r.offset, r.length);  // (a range past the end comes back short)
  return a;
}

}  // namespace ddpio::testing
