#include "ddpio/pipeline/internal/shared_index.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/remote/remote_format.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::internal {
namespace {

using storage::remote::RemoteIndexBytes;

// An error's message and a URL travel at most this long.
constexpr uint64_t kMaxTextBytes = 64 << 10;
// A larger index is not shared (each rank fetches its own): 2^26 records' worth.
constexpr uint64_t kMaxSharedIndexBytes = uint64_t{1} << 30;

// What rank 0 says first: whether it shares, its URL's length, then what follows.
struct Head {
  uint64_t shared = 0;               // 1: rank 0 reads an s3:// dataset and sends what follows
  uint64_t code = 0;                 // rank 0's error fetching (absl::StatusCode), 0: fetched
  uint64_t url = 0;                  // bytes of rank 0's URL
  uint64_t manifest = 0, index = 0;  // bytes that follow (manifest: the error's, on an error)
};

absl::Status Broadcast(comm::Communicator& world, char* data, uint64_t bytes,
                       std::chrono::milliseconds timeout) {
  if (bytes == 0) return absl::OkStatus();
  return comm::BroadcastHost(world, data, bytes, 0, timeout);
}

// `url` as rank 0 and this rank both write it ("" when not an s3:// URL).
std::string Normalized(const std::string& url) {
  absl::StatusOr<storage::s3::S3Url> parsed = storage::s3::ParseS3Url(url);
  return parsed.ok() ? parsed->ToString() : "";
}

}  // namespace

absl::Status ShareStoreIndex(comm::Communicator& world, const std::string& data,
                             std::chrono::milliseconds timeout, storage::ReaderOptions* options) {
  if (world.size() <= 1) return absl::OkStatus();
  const bool root = world.rank() == 0;
  // Rank 0's fetch is two requests (four when there is nothing at the URL), each bounded by the
  // job's timeout (ReaderOptions::store_deadline): the others wait for all of it.
  const std::chrono::milliseconds wait = 5 * timeout;
  const std::string mine = storage::s3::IsS3Url(data) ? Normalized(data) : "";
  Head head;
  std::string url, error;
  std::shared_ptr<const RemoteIndexBytes> sent;
  if (root && !mine.empty() && mine.size() <= kMaxTextBytes) {
    url = mine;
    absl::StatusOr<std::shared_ptr<const RemoteIndexBytes>> fetched =
        storage::DatasetReader::FetchStoreIndex(data, *options);
    if (fetched.ok() && (*fetched)->index.size() <= kMaxSharedIndexBytes &&
        (*fetched)->manifest.size() <= storage::remote::kMaxRemoteManifestBytes) {
      sent = *std::move(fetched);
      head = {1, 0, url.size(), sent->manifest.size(), sent->index.size()};
    } else if (!fetched.ok()) {
      error = std::string(fetched.status().message()).substr(0, kMaxTextBytes);
      head = {1, static_cast<uint64_t>(fetched.status().code()), url.size(), error.size(), 0};
    }
  }
  DDPIO_RETURN_IF_ERROR(comm::BroadcastHost(world, &head, sizeof(head), 0, wait));
  if (head.shared == 0) return absl::OkStatus();  // each rank fetches its own
  if (head.url > kMaxTextBytes || head.manifest > kMaxSharedIndexBytes ||
      head.index > kMaxSharedIndexBytes) {
    return absl::DataLossError(absl::StrCat(
        "rank 0 announced a dataset index of ", head.index, " bytes and a URL of ", head.url,
        " bytes, beyond what it may send: not the same ddpio on every rank?"));
  }
  url.resize(head.url);
  DDPIO_RETURN_IF_ERROR(Broadcast(world, url.data(), url.size(), wait));
  // A rank given another dataset than rank 0 receives what rank 0 sends (a collective) and opens
  // its own; the group then compares datasets and fails a member whose differs from its leader's.
  const bool same = url == mine;
  if (head.code != 0) {
    error.resize(head.manifest);
    DDPIO_RETURN_IF_ERROR(Broadcast(world, error.data(), error.size(), wait));
    if (!same) return absl::OkStatus();
    const auto code = static_cast<absl::StatusCode>(head.code);
    if (root) return absl::Status(code, error);
    return absl::Status(
        code,
        absl::StrCat("rank 0, which fetches the dataset's index for the job, could not: ", error));
  }
  if (root) {
    // Broadcast reads the root's buffers only.
    DDPIO_RETURN_IF_ERROR(
        Broadcast(world, const_cast<char*>(sent->manifest.data()), sent->manifest.size(), wait));
    DDPIO_RETURN_IF_ERROR(
        Broadcast(world, const_cast<char*>(sent->index.data()), sent->index.size(), wait));
    options->store_overrides.preloaded_index = std::move(sent);
    return absl::OkStatus();
  }
  RemoteIndexBytes got;
  got.manifest.resize(head.manifest);
  got.index.resize(head.index);
  DDPIO_RETURN_IF_ERROR(Broadcast(world, got.manifest.data(), got.manifest.size(), wait));
  DDPIO_RETURN_IF_ERROR(Broadcast(world, got.index.data(), got.index.size(), wait));
  if (same) {
    options->store_overrides.preloaded_index =
        std::make_shared<const RemoteIndexBytes>(std::move(got));
  }
  return absl::OkStatus();
}

}  // namespace ddpio::internal
