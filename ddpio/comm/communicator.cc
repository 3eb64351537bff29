#include "ddpio/comm/communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {
absl::Status Communicator::CheckBroadcast(int root) const {
  if (BadRoot(root)) return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root));
  return absl::OkStatus();
}

absl::Status Communicator::CheckScatter(const std::vector<const void*>& parts, int root) const {
  if (BadRoot(root)) return absl::InvalidArgumentError(absl::StrCat("scatter root ", root));
  if (rank() == root && static_cast<int>(parts.size()) != size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scatter needs ", size(), " parts on the root, got ", parts.size()));
  }
  return absl::OkStatus();
}

absl::Status Communicator::CheckSend(int peer) const {
  if (BadPeer(peer)) return absl::InvalidArgumentError(absl::StrCat("send peer ", peer));
  return absl::OkStatus();
}

absl::Status Communicator::CheckRecv(int peer) const {
  if (BadPeer(peer)) return absl::InvalidArgumentError(absl::StrCat("recv peer ", peer));
  return absl::OkStatus();
}

absl::Status Communicator::CheckSendMany(const std::vector<SendPart>& parts) const {
  for (const SendPart& p : parts) DDPIO_RETURN_IF_ERROR(CheckSend(p.peer));
  return absl::OkStatus();
}

absl::Status Communicator::CheckSendChunked(size_t chunk, int peer) const {
  if (chunk == 0 || BadPeer(peer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked send to peer ", peer, " in chunks of ", chunk));
  }
  return absl::OkStatus();
}

absl::Status Communicator::CheckRecvChunked(size_t chunk, int peer) const {
  if (chunk == 0 || BadPeer(peer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked receive from peer ", peer, " in chunks of ", chunk));
  }
  return absl::OkStatus();
}

absl::Status Communicator::CheckRecvForward(size_t chunk, int from, int to) const {
  if (chunk == 0 || BadPeer(from) || BadPeer(to)) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked forward from peer ", from, " to peer ", to, " in chunks of ", chunk));
  }
  return absl::OkStatus();
}

absl::Status Communicator::SendChunked(const void* data, size_t bytes, size_t chunk, int peer,
                                       uint64_t tag, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckSendChunked(chunk, peer));
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t off = 0; off < bytes; off += chunk) {
    DDPIO_RETURN_IF_ERROR(Send(p + off, std::min(chunk, bytes - off), peer, tag, timeout));
  }
  return absl::OkStatus();
}

absl::Status Communicator::RecvChunked(void* data, size_t bytes, size_t chunk, int peer,
                                       uint64_t tag, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckRecvChunked(chunk, peer));
  auto* p = static_cast<uint8_t*>(data);
  for (size_t off = 0; off < bytes; off += chunk) {
    DDPIO_RETURN_IF_ERROR(Recv(p + off, std::min(chunk, bytes - off), peer, tag, timeout));
  }
  return absl::OkStatus();
}

absl::Status Communicator::RecvForward(void* data, size_t bytes, size_t chunk, int from, int to,
                                       uint64_t tag, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckRecvForward(chunk, from, to));
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
  DDPIO_RETURN_IF_ERROR(CheckSendMany(parts));
  for (const SendPart& p : parts)
    DDPIO_RETURN_IF_ERROR(Send(p.data, p.bytes, p.peer, tag, timeout));
  return absl::OkStatus();
}

absl::Status Communicator::StageIn(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status Communicator::CopyOut(void* dst, const void* src, size_t bytes,
                                   std::chrono::milliseconds /*timeout*/) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status AllGatherHost(Communicator& comm, const void* in, void* out, size_t bytes,
                           std::chrono::milliseconds timeout) {
  if (!comm.device_memory()) return comm.AllGather(in, out, bytes, timeout);
  const size_t all = bytes * static_cast<size_t>(comm.size());
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buffer, comm.Allocate(bytes + all));
  DDPIO_RETURN_IF_ERROR(comm.StageIn(buffer.get(), in, bytes));
  DDPIO_RETURN_IF_ERROR(comm.AllGather(buffer.get(), buffer.get() + bytes, bytes, timeout));
  return comm.CopyOut(out, buffer.get() + bytes, all, timeout);
}

absl::Status BroadcastHost(Communicator& comm, void* data, size_t bytes, int root,
                           std::chrono::milliseconds timeout) {
  if (!comm.device_memory()) return comm.Broadcast(data, bytes, root, timeout);
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buffer, comm.Allocate(bytes));
  DDPIO_RETURN_IF_ERROR(comm.StageIn(buffer.get(), data, bytes));
  DDPIO_RETURN_IF_ERROR(comm.Broadcast(buffer.get(), bytes, root, timeout));
  return comm.CopyOut(data, buffer.get(), bytes, timeout);
}

absl::Status AllReduceHost(Communicator& comm, float* data, size_t count, ReduceOp op,
                           std::chrono::milliseconds timeout) {
  if (!comm.device_memory()) return comm.AllReduce(data, count, op, timeout);
  DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buffer, comm.Allocate(count * sizeof(float)));
  float* device = reinterpret_cast<float*>(buffer.get());
  DDPIO_RETURN_IF_ERROR(comm.StageIn(device, data, count * sizeof(float)));
  DDPIO_RETURN_IF_ERROR(comm.AllReduce(device, count, op, timeout));
  return comm.CopyOut(data, device, count * sizeof(float), timeout);
}

absl::StatusOr<std::vector<std::string>> AllGatherStrings(Communicator& comm,
                                                          const std::string& mine,
                                                          std::chrono::milliseconds timeout,
                                                          size_t max_bytes) {
  const size_t n = static_cast<size_t>(comm.size());
  const uint64_t length = mine.size();
  std::vector<uint64_t> lengths(n);
  DDPIO_RETURN_IF_ERROR(AllGatherHost(comm, &length, lengths.data(), sizeof(length), timeout));
  const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a text of ", longest,
                                                   " bytes to share among the ranks; at most ",
                                                   max_bytes, " are allowed"));
  }
  std::vector<std::string> all(n);
  if (longest == 0) return all;
  std::vector<char> in(longest, '\0'), out(longest * n);
  std::copy(mine.begin(), mine.end(), in.begin());
  DDPIO_RETURN_IF_ERROR(AllGatherHost(comm, in.data(), out.data(), longest, timeout));
  for (size_t r = 0; r < n; ++r) all[r].assign(out.data() + r * longest, lengths[r]);
  return all;
}

}  // namespace ddpio::comm
