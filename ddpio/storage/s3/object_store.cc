#include "ddpio/storage/s3/object_store.h"

#include <map>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ddpio/storage/s3/s3_client.h"

namespace ddpio::storage::s3 {
namespace {

std::mutex registry_mu;
std::map<std::string, ObjectStoreFactory>& Registry() {  // guarded by registry_mu
  static auto* factories = new std::map<std::string, ObjectStoreFactory>();
  return *factories;
}

}  // namespace

std::string ObjectStore::Name(const std::string& bucket, const std::string& key) {
  return key.empty() ? absl::StrCat("s3://", bucket) : absl::StrCat("s3://", bucket, "/", key);
}

void RegisterObjectStore(const std::string& scheme, ObjectStoreFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mu);
  Registry()[scheme] = std::move(factory);
}

absl::StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStore(const S3Config& config,
                                                             const S3ClientOptions& options) {
  const size_t colon = config.endpoint.find("://");
  const std::string scheme =
      colon == std::string::npos ? std::string() : config.endpoint.substr(0, colon);
  if (scheme == "http" || scheme == "https") {
    absl::StatusOr<std::unique_ptr<S3Client>> s3 = S3Client::Create(config, options);
    if (!s3.ok()) return s3.status();
    return std::unique_ptr<ObjectStore>(*std::move(s3));
  }
  ObjectStoreFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = Registry().find(scheme);
    if (it != Registry().end()) factory = it->second;
  }
  if (!factory) {
    return absl::InvalidArgumentError(absl::StrCat(
        "object store endpoint '", config.endpoint,
        "': not http:// or https:// (S3), and no store is registered for '", scheme, "://'"));
  }
  return factory(config, options);
}

}  // namespace ddpio::storage::s3
