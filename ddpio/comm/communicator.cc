#include "ddpio/comm/communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {
namespace {

absl::Status CheckChunk(size_t chunk, int size, std::initializer_list<int> peers, int self) {
  if (chunk == 0) return absl::InvalidArgumentError("chunked transfer with a chunk of 0 bytes");
  for (int p : peers) {
    if (p < 0 || p >= size || p == self) return absl::InvalidArgumentError(absl::StrCat("chunked transfer peer ", p));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Communicator::SendChunked(const void* data, size_t bytes, size_t chunk, int peer, uint64_t tag,
                                       std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckChunk(chunk, size(), {peer}, rank()));
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t off = 0; off < bytes; off += chunk) {
    DDPIO_RETURN_IF_ERROR(Send(p + off, std::min(chunk, bytes - off), peer, tag, timeout));
  }
  return absl::OkStatus();
}

absl::Status Communicator::RecvChunked(void* data, size_t bytes, size_t chunk, int peer, uint64_t tag,
                                       std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckChunk(chunk, size(), {peer}, rank()));
  auto* p = static_cast<uint8_t*>(data);
  for (size_t off = 0; off < bytes; off += chunk) {
    DDPIO_RETURN_IF_ERROR(Recv(p + off, std::min(chunk, bytes - off), peer, tag, timeout));
  }
  return absl::OkStatus();
}

absl::Status Communicator::RecvForward(void* data, size_t bytes, size_t chunk, int from, int to, uint64_t tag,
                                       std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckChunk(chunk, size(), {from, to}, rank()));
  auto* p = static_cast<uint8_t*>(data);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = std::min(chunk, bytes - off);
    DDPIO_RETURN_IF_ERROR(Recv(p + off, n, from, tag, timeout));
    DDPIO_RETURN_IF_ERROR(Send(p + off, n, to, tag, timeout));
  }
  return absl::OkStatus();
}

absl::Status Communicator::SendMany(const std::vector<SendPart>& parts, uint64_t tag,
                                    std::chrono::milliseconds timeout) {
  for (const SendPart& p : parts) DDPIO_RETURN_IF_ERROR(Send(p.data, p.bytes, p.peer, tag, timeout));
  return absl::OkStatus();
}

absl::Status Communicator::StageIn(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status Communicator::CopyOut(void* dst, const void* src, size_t bytes, std::chrono::milliseconds /*timeout*/) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

}  // namespace ddpio::comm
