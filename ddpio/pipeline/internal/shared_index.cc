#include "ddpio/pipeline/internal/shared_index.h"

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/s3/s3_config.h"

namespace ddpio::internal {
namespace {

// An error's message travels at most this long.
constexpr uint64_t kMaxMessageBytes = 64 << 10;

absl::Status Broadcast(comm::Communicator& world, std::string* bytes,
                       std::chrono::milliseconds timeout) {
  if (bytes->empty()) return absl::OkStatus();
  return comm::BroadcastHost(world, bytes->data(), bytes->size(), 0, timeout);
}

}  // namespace

absl::Status ShareStoreIndex(comm::Communicator& world, const std::string& data,
                             std::chrono::milliseconds timeout, storage::ReaderOptions* options) {
  if (world.size() <= 1 || !storage::s3::IsS3Url(data)) return absl::OkStatus();
  const bool root = world.rank() == 0;
  const std::chrono::milliseconds wait = 2 * timeout;
  storage::remote::RemoteIndexBytes bytes;
  std::string error;
  uint64_t head[3] = {0, 0, 0};  // status code (0: fetched), manifest or error bytes, index bytes
  if (root) {
    absl::StatusOr<std::shared_ptr<const storage::remote::RemoteIndexBytes>> fetched =
        storage::DatasetReader::FetchStoreIndex(data, *options);
    if (fetched.ok()) {
      bytes = **fetched;
      head[1] = bytes.manifest.size();
      head[2] = bytes.index.size();
    } else {
      error = std::string(fetched.status().message()).substr(0, kMaxMessageBytes);
      head[0] = static_cast<uint64_t>(fetched.status().code());
      head[1] = error.size();
    }
  }
  DDPIO_RETURN_IF_ERROR(comm::BroadcastHost(world, head, sizeof(head), 0, wait));
  if (head[0] != 0) {
    if (!root) error.resize(std::min(head[1], kMaxMessageBytes));
    DDPIO_RETURN_IF_ERROR(Broadcast(world, &error, wait));
    const auto code = static_cast<absl::StatusCode>(head[0]);
    if (root) return absl::Status(code, error);
    return absl::Status(code, absl::StrCat("rank 0, which fetches the dataset's index for the job, "
                                           "could not: ",
                                           error));
  }
  if (!root) {
    bytes.manifest.resize(head[1]);
    bytes.index.resize(head[2]);
  }
  DDPIO_RETURN_IF_ERROR(Broadcast(world, &bytes.manifest, wait));
  DDPIO_RETURN_IF_ERROR(Broadcast(world, &bytes.index, wait));
  options->store_overrides.preloaded_index =
      std::make_shared<const storage::remote::RemoteIndexBytes>(std::move(bytes));
  return absl::OkStatus();
}

}  // namespace ddpio::internal
