// Communicator: the collectives the group feeder and the trainer need, behind one interface
// with a Gloo backend (CPU, TCP) and an NCCL backend (GPU).
//
// Every call takes a timeout and returns a Status — Unavailable when a peer is gone,
// DeadlineExceeded when the timeout passes first — and never throws across the interface. After
// a failure the communicator is unusable (Gloo and NCCL both poison their context): every later
// call returns FailedPrecondition naming the first error. Abort() makes peers blocked on this
// rank fail fast instead of waiting for their timeout. Calls are made by one thread at a time,
// in the same order on every rank.
//
// Buffers live where the backend wants them: host memory for Gloo, memory of this rank's CUDA
// device for NCCL (device_memory()). Allocate() returns a buffer of the right kind.
#ifndef DDPIO_COMM_COMMUNICATOR_H_
#define DDPIO_COMM_COMMUNICATOR_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpio::comm {

enum class ReduceOp { kSum, kAverage };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;
  // True when buffers must be device memory (NCCL), false for host memory (Gloo).
  virtual bool device_memory() const { return false; }
  // `bytes` of memory this communicator can use, freed when the last reference goes.
  virtual absl::StatusOr<std::shared_ptr<uint8_t>> Allocate(size_t bytes) {
    return std::shared_ptr<uint8_t>(new uint8_t[bytes > 0 ? bytes : 1],
                                    std::default_delete<uint8_t[]>());
  }

  // The root's `bytes` at `data` end up in `data` on every rank.
  virtual absl::Status Broadcast(void* data, size_t bytes, int root,
                                 std::chrono::milliseconds timeout) = 0;
  // Rank i receives the root's parts[i] (each `bytes` long) in `out`; parts is read on the root
  // only (size() entries).
  virtual absl::Status Scatter(const std::vector<const void*>& parts, void* out, size_t bytes,
                               int root, std::chrono::milliseconds timeout) = 0;
  // Element-wise sum (or average) of `count` floats over all ranks, in place.
  virtual absl::Status AllReduce(float* data, size_t count, ReduceOp op,
                                 std::chrono::milliseconds timeout) = 0;
  // Every rank's `bytes` from `in`, in rank order, into `out` (size() * bytes).
  virtual absl::Status AllGather(const void* in, void* out, size_t bytes,
                                 std::chrono::milliseconds timeout) = 0;
  // Point to point: `tag` pairs a Send with its Recv (the same tag on both sides). NCCL has no
  // tags: there, sends and receives between two ranks pair up in the order they are made, so
  // portable callers make them in the same order on both sides (and use the same tag).
  virtual absl::Status Send(const void* data, size_t bytes, int peer, uint64_t tag,
                            std::chrono::milliseconds timeout) = 0;
  virtual absl::Status Recv(void* data, size_t bytes, int peer, uint64_t tag,
                            std::chrono::milliseconds timeout) = 0;
  virtual absl::Status Barrier(std::chrono::milliseconds timeout) = 0;

  // Chunked point to point, for pipelined relays: `bytes` travel as ceil(bytes / chunk) messages
  // of `chunk` bytes (the last one shorter) under `tag`. SendChunked pairs with RecvChunked or
  // RecvForward on the peer, called with the same `bytes` and `chunk`. `timeout` applies to each
  // chunk. InvalidArgument for a zero chunk or a bad peer.
  virtual absl::Status SendChunked(const void* data, size_t bytes, size_t chunk, int peer,
                                   uint64_t tag, std::chrono::milliseconds timeout);
  virtual absl::Status RecvChunked(void* data, size_t bytes, size_t chunk, int peer, uint64_t tag,
                                   std::chrono::milliseconds timeout);
  // Receives `bytes` from `from` (sent with SendChunked or forwarded with RecvForward) into
  // `data` and forwards each chunk to `to` as soon as it has arrived, so that in a chain of
  // ranks every link carries the data once and all links are busy at the same time. The base
  // implementation does one chunk after the other; Gloo's keeps every chunk in flight.
  virtual absl::Status RecvForward(void* data, size_t bytes, size_t chunk, int from, int to,
                                   uint64_t tag, std::chrono::milliseconds timeout);
  // One send of many: each part goes to its peer, which receives it with Recv (same tag). NCCL
  // posts them as one group (ncclGroupStart/End), so the sends to every peer proceed together;
  // the base implementation sends one after the other.
  struct SendPart {
    const void* data;
    size_t bytes;
    int peer;
  };
  virtual absl::Status SendMany(const std::vector<SendPart>& parts, uint64_t tag,
                                std::chrono::milliseconds timeout);

  // Moving bytes between host memory and this communicator's memory (device memory for NCCL; a
  // memcpy for host-memory backends). StageIn copies `bytes` of host `src` to `dst` ordered
  // before this communicator's next operation; it may return before the copy is done (NCCL: on a
  // copy stream that the communication stream waits for through an event), so `src` must stay
  // unchanged until that next operation has returned. CopyOut copies to host `dst` and returns
  // once the bytes are there, after the operations before it.
  virtual absl::Status StageIn(void* dst, const void* src, size_t bytes);
  virtual absl::Status CopyOut(void* dst, const void* src, size_t bytes,
                               std::chrono::milliseconds timeout);
  // Returns once every operation and staged copy made before it has completed.
  virtual absl::Status Synchronize(std::chrono::milliseconds /*timeout*/) {
    return absl::OkStatus();
  }
  // Orders this communicator's next operation after `event`, a CUDA event recorded on another
  // stream of this rank's device (NCCL: cudaStreamWaitEvent, no host wait) — how a gradient
  // all-reduce waits for backward. Host-memory backends have nothing to wait for.
  virtual absl::Status WaitFor(void* /*event*/) { return absl::OkStatus(); }

  // Tears the connections down; this communicator is unusable afterwards.
  virtual void Abort() = 0;

 protected:
  // The argument checks of the calls above, made by every backend before anything is sent, so
  // that all reject the same calls with the same InvalidArgument: a root or a peer outside the
  // group (a peer that is this rank, too), a root's parts not one per rank, a zero chunk.
  absl::Status CheckBroadcast(int root) const;
  absl::Status CheckScatter(const std::vector<const void*>& parts, int root) const;
  absl::Status CheckSend(int peer) const;
  absl::Status CheckRecv(int peer) const;
  absl::Status CheckSendMany(const std::vector<SendPart>& parts) const;
  absl::Status CheckSendChunked(size_t chunk, int peer) const;
  absl::Status CheckRecvChunked(size_t chunk, int peer) const;
  absl::Status CheckRecvForward(size_t chunk, int from, int to) const;

 private:
  bool BadRoot(int root) const { return root < 0 || root >= size(); }
  bool BadPeer(int peer) const { return peer < 0 || peer >= size() || peer == rank(); }
};

// Collectives on small host buffers whatever memory the communicator wants: through a buffer
// of its own (Allocate, StageIn, the collective, CopyOut) — for agreeing on settings, counts and
// sums over an NCCL communicator, whose collectives accept device memory only.
absl::Status AllGatherHost(Communicator& comm, const void* in, void* out, size_t bytes,
                           std::chrono::milliseconds timeout);
absl::Status BroadcastHost(Communicator& comm, void* data, size_t bytes, int root,
                           std::chrono::milliseconds timeout);
absl::Status AllReduceHost(Communicator& comm, float* data, size_t count, ReduceOp op,
                           std::chrono::milliseconds timeout);
// Every rank's `mine` (any length up to `max_bytes`), in rank order: two all-gathers (the lengths,
// then the texts padded to the longest). InvalidArgument when `mine` is longer than `max_bytes`
// (checked on every rank after the lengths are known, so all fail together).
absl::StatusOr<std::vector<std::string>> AllGatherStrings(Communicator& comm,
                                                          const std::string& mine,
                                                          std::chrono::milliseconds timeout,
                                                          size_t max_bytes = size_t{1} << 20);

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_COMMUNICATOR_H_
