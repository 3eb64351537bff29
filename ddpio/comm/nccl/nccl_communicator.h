// The NCCL backend of Communicator: GPU buffers, NCCL collectives on a dedicated stream.
//
// Create() is handed the rank's device as a device::CudaRuntime (device::OpenDeviceForRank picks
// it), gets NCCL's unique id through the Store (rank 0 makes it, the others read it), creates a
// non-blocking stream and a non-blocking communicator (ncclConfig_t.blocking = 0) so that no NCCL
// call can block this thread. Every operation is enqueued on the stream, then waited for by polling
// the stream (cudaStreamQuery) and the communicator's asynchronous error (ncclCommGetAsyncError):
//   - an asynchronous error (a peer died: ncclRemoteError / ncclSystemError) → the communicator
//     is aborted and the call returns Unavailable;
//   - the timeout passes first → the communicator is aborted (which also frees the kernels
//     still waiting on peers) and the call returns DeadlineExceeded;
//   - a CUDA error from the stream → Internal.
// After any of these the communicator is unusable (FailedPrecondition naming the first error),
// like the Gloo backend. NCCL is called through NcclApi (nccl_api.h), the CUDA runtime through
// device::CudaRuntime; both are interfaces, so the tests run this class without a GPU.
#ifndef DDPIO_COMM_NCCL_NCCL_COMMUNICATOR_H_
#define DDPIO_COMM_NCCL_NCCL_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/comm/communicator.h"
#include "ddpio/comm/nccl/nccl_api.h"
#include "ddpio/comm/store.h"
#include "ddpio/device/cuda_runtime.h"

namespace ddpio::comm {

struct NcclOptions {
  // How long Create() waits for the unique id and for every rank to join.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // How often a waiting call looks at the stream and the asynchronous error.
  std::chrono::microseconds poll_interval{100};
};

class NcclCommunicator : public Communicator {
 public:
  // On `cuda`'s device, which buffers from Allocate() keep alive. DeadlineExceeded when the
  // unique id or a rank does not arrive within options.timeout; the mapped NCCL/CUDA error
  // otherwise.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      NcclApi& api, std::shared_ptr<device::CudaRuntime> cuda, std::shared_ptr<Store> store,
      int rank, int size, const NcclOptions& options = {});
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  bool device_memory() const override { return true; }
  int device() const { return cuda_->device(); }
  absl::StatusOr<std::shared_ptr<uint8_t>> Allocate(size_t bytes) override;

  absl::Status Broadcast(void* data, size_t bytes, int root,
                         std::chrono::milliseconds timeout) override;
  absl::Status Scatter(const std::vector<const void*>& parts, void* out, size_t bytes, int root,
                       std::chrono::milliseconds timeout) override;
  absl::Status AllReduce(float* data, size_t count, ReduceOp op,
                         std::chrono::milliseconds timeout) override;
  absl::Status AllGather(const void* in, void* out, size_t bytes,
                         std::chrono::milliseconds timeout) override;
  absl::Status Send(const void* data, size_t bytes, int peer, uint64_t tag,
                    std::chrono::milliseconds timeout) override;
  absl::Status Recv(void* data, size_t bytes, int peer, uint64_t tag,
                    std::chrono::milliseconds timeout) override;
  absl::Status Barrier(std::chrono::milliseconds timeout) override;
  // One ncclGroupStart/End around every part's ncclSend.
  absl::Status SendMany(const std::vector<SendPart>& parts, uint64_t tag,
                        std::chrono::milliseconds timeout) override;
  // Host -> device on a copy stream of its own (made at the first call), then an event the
  // communication stream waits for: the host goes on (staging the step's other batches) while the
  // copy runs, and no host thread waits for it. (Steps do not overlap: every operation is waited
  // for before the next step is staged.)
  absl::Status StageIn(void* dst, const void* src, size_t bytes) override;
  // Device -> host on the communication stream, waited for like an operation (after waiting, under
  // the timeout, for what is queued before it: a copy into pageable memory blocks in the call).
  absl::Status CopyOut(void* dst, const void* src, size_t bytes,
                       std::chrono::milliseconds timeout) override;
  // Waits for the communication stream, which waits for the staged copies.
  absl::Status Synchronize(std::chrono::milliseconds timeout) override;
  absl::Status WaitFor(void* event) override;
  void Abort() override;

 private:
  NcclCommunicator(NcclApi& api, std::shared_ptr<device::CudaRuntime> cuda, int rank, int size,
                   std::chrono::microseconds poll)
      : api_(api), cuda_(std::move(cuda)), rank_(rank), size_(size), poll_(poll) {}
  absl::Status Init(Store& store, const NcclOptions& options);
  // Checks the communicator is usable, enqueues with `enqueue` (returns the NCCL/CUDA result as
  // a Status) and waits for the stream.
  template <typename Fn>
  absl::Status Run(const char* what, std::chrono::milliseconds timeout, Fn enqueue);
  // Polls until the stream is idle (or, with wait_stream false, until the communicator is no
  // longer in progress), an asynchronous error shows, or the timeout passes.
  absl::Status Wait(const char* what, std::chrono::milliseconds timeout, bool wait_stream);
  absl::Status Check(const char* what, ncclResult_t result);
  // A CUDA runtime error with this rank in the message.
  absl::Status OnRank(absl::Status status) const;
  cudaStream_t nccl_stream() const { return static_cast<cudaStream_t>(stream_); }
  // Aborts the communicator and remembers `status` as the reason; returns it.
  absl::Status Fail(absl::Status status);

  NcclApi& api_;
  const std::shared_ptr<device::CudaRuntime> cuda_;
  const int rank_;
  const int size_;
  const std::chrono::microseconds poll_;
  ncclComm_t comm_ = nullptr;
  void* stream_ = nullptr;       // the communication stream
  float* scratch_ = nullptr;     // one float on the device, for Barrier
  void* copy_stream_ = nullptr;  // StageIn's, with its event
  void* staged_ = nullptr;
  absl::Status broken_;
};

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_NCCL_NCCL_COMMUNICATOR_H_
