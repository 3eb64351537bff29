#include "ddpio/comm/nccl/nccl_communicator.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kUniqueIdKey[] = "nccl-unique-id";

absl::StatusCode CodeOf(ncclResult_t r) {
  switch (r) {
    case ncclSystemError:
    case ncclRemoteError:
      return absl::StatusCode::kUnavailable;  // a peer or the network failed
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    case ncclUnhandledCudaError:
    case ncclInternalError:
      return absl::StatusCode::kInternal;
    default:
      return absl::StatusCode::kUnknown;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    NcclApi& api, std::shared_ptr<device::CudaRuntime> cuda, std::shared_ptr<Store> store, int rank,
    int size, const NcclOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside a world of ", size));
  }
  if (cuda == nullptr) return absl::InvalidArgumentError("the NCCL backend needs a CUDA runtime");
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(api, std::move(cuda), rank, size, options.poll_interval));
  DDPIO_RETURN_IF_ERROR(c->Init(*store, options));
  return c;
}

absl::Status NcclCommunicator::Init(Store& store, const NcclOptions& options) {
  DDPIO_RETURN_IF_ERROR(OnRank(cuda_->Activate()));  // NCCL joins on the current device

  ncclUniqueId id;
  if (rank_ == 0) {
    DDPIO_RETURN_IF_ERROR(Check("ncclGetUniqueId", api_.GetUniqueId(&id)));
    DDPIO_RETURN_IF_ERROR(store.Set(kUniqueIdKey, std::string(id.internal, sizeof(id.internal))));
  } else {
    DDPIO_ASSIGN_OR_RETURN(std::string bytes, store.Get(kUniqueIdKey, options.timeout));
    if (bytes.size() != sizeof(id.internal)) {
      return absl::DataLossError(absl::StrCat("the NCCL unique id in the store has ", bytes.size(),
                                              " bytes, expected ", sizeof(id.internal)));
    }
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }
  absl::StatusOr<void*> stream = cuda_->CreateStream();  // non-blocking
  if (!stream.ok()) return OnRank(stream.status());
  stream_ = *stream;
  void* scratch = nullptr;
  DDPIO_RETURN_IF_ERROR(OnRank(cuda_->DeviceAlloc(&scratch, sizeof(float))));
  scratch_ = static_cast<float*>(scratch);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // no call may block: Wait() enforces the timeout
  ncclResult_t r = api_.CommInitRankConfig(&comm_, size_, id, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    absl::Status s = Check("ncclCommInitRankConfig", r);
    return comm_ != nullptr ? Fail(s) : s;
  }
  absl::Status s = Wait("joining the NCCL communicator", options.timeout, /*wait_stream=*/false);
  if (s.ok()) {
    DDPIO_LOG(INFO) << "NCCL communicator: rank " << rank_ << " of " << size_ << " on CUDA device "
                    << device();
  }
  return s;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    ncclResult_t r = api_.CommDestroy(comm_);
    if (r != ncclSuccess) DDPIO_LOG(WARNING) << "ncclCommDestroy: " << api_.GetErrorString(r);
  }
  if (scratch_ != nullptr) cuda_->DeviceFree(scratch_);
  if (staged_ != nullptr) cuda_->DestroyEvent(staged_);
  if (copy_stream_ != nullptr) cuda_->DestroyStream(copy_stream_);
  if (stream_ != nullptr) cuda_->DestroyStream(stream_);
}

absl::Status NcclCommunicator::Check(const char* what, ncclResult_t result) {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  std::string detail = comm_ != nullptr ? api_.GetLastError(comm_) : "";
  return absl::Status(CodeOf(result),
                      absl::StrCat(what, " on rank ", rank_, ": ", api_.GetErrorString(result),
                                   detail.empty() ? "" : " (", detail, detail.empty() ? "" : ")"));
}

absl::Status NcclCommunicator::OnRank(absl::Status status) const {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), " (rank ", rank_, ")"));
}

absl::Status NcclCommunicator::Fail(absl::Status status) {
  if (comm_ != nullptr) {
    (void)api_.CommAbort(comm_);
    comm_ = nullptr;
  }
  if (broken_.ok()) broken_ = status;
  return status;
}

absl::Status NcclCommunicator::Wait(const char* what, std::chrono::milliseconds timeout,
                                    bool wait_stream) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = api_.CommGetAsyncError(comm_, &async);
    if (r != ncclSuccess) return Fail(Check("ncclCommGetAsyncError", r));
    if (async != ncclSuccess && async != ncclInProgress) return Fail(Check(what, async));
    if (async == ncclSuccess) {
      if (!wait_stream) return absl::OkStatus();
      absl::StatusOr<bool> idle = cuda_->StreamIdle(stream_);
      if (!idle.ok()) {
        return Fail(absl::Status(idle.status().code(), absl::StrCat(what, " on rank ", rank_, ": ",
                                                                    idle.status().message())));
      }
      if (*idle) return absl::OkStatus();
    }
    if (Clock::now() >= deadline) {
      return Fail(absl::DeadlineExceededError(
          absl::StrCat(what, " on rank ", rank_, " did not complete within ", timeout.count(),
                       " ms (a peer is stalled, gone, or not making the same call); NCCL "
                       "communicator aborted")));
    }
    std::this_thread::sleep_for(poll_);
  }
}

template <typename Fn>
absl::Status NcclCommunicator::Run(const char* what, std::chrono::milliseconds timeout,
                                   Fn enqueue) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": communicator unusable after an earlier error (", broken_.message(), ")"));
  }
  if (comm_ == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(what, ": communicator aborted"));
  // The current device is per thread, and the feeder's and the reducer's threads call too.
  absl::Status s = OnRank(cuda_->Activate());
  if (s.ok()) s = enqueue();
  if (!s.ok()) return Fail(s);
  return Wait(what, timeout, /*wait_stream=*/true);
}

absl::StatusOr<std::shared_ptr<uint8_t>> NcclCommunicator::Allocate(size_t bytes) {
  void* p = nullptr;
  DDPIO_RETURN_IF_ERROR(OnRank(cuda_->DeviceAlloc(&p, bytes > 0 ? bytes : 1)));
  // The buffer keeps the runtime alive: it may outlive the communicator.
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p),
                                  [cuda = cuda_](uint8_t* q) { cuda->DeviceFree(q); });
}

absl::Status NcclCommunicator::Broadcast(void* data, size_t bytes, int root,
                                         std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckBroadcast(root));
  if (bytes == 0) return absl::OkStatus();
  return Run("broadcast", timeout, [&] {
    return Check("ncclBroadcast",
                 api_.Broadcast(data, data, bytes, ncclUint8, root, comm_, nccl_stream()));
  });
}

absl::Status NcclCommunicator::Scatter(const std::vector<const void*>& parts, void* out,
                                       size_t bytes, int root, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckScatter(parts, root));
  if (bytes == 0) return absl::OkStatus();
  // NCCL has no scatter: the root's grouped sends, each peer's receive.
  return Run("scatter", timeout, [&]() -> absl::Status {
    if (rank_ == root) {
      DDPIO_RETURN_IF_ERROR(OnRank(
          cuda_->CopyAsync(out, parts[root], bytes, device::CopyKind::kDeviceToDevice, stream_)));
      DDPIO_RETURN_IF_ERROR(Check("ncclGroupStart", api_.GroupStart()));
      absl::Status sent;
      for (int i = 0; i < size_ && sent.ok(); ++i) {
        if (i != root)
          sent = Check("ncclSend", api_.Send(parts[i], bytes, ncclUint8, i, comm_, nccl_stream()));
      }
      absl::Status ended = Check("ncclGroupEnd", api_.GroupEnd());  // always close the group
      return sent.ok() ? ended : sent;
    }
    return Check("ncclRecv", api_.Recv(out, bytes, ncclUint8, root, comm_, nccl_stream()));
  });
}

absl::Status NcclCommunicator::AllReduce(float* data, size_t count, ReduceOp op,
                                         std::chrono::milliseconds timeout) {
  if (count == 0) return absl::OkStatus();
  return Run("all-reduce", timeout, [&] {
    return Check("ncclAllReduce", api_.AllReduce(data, data, count, ncclFloat32,
                                                 op == ReduceOp::kAverage ? ncclAvg : ncclSum,
                                                 comm_, nccl_stream()));
  });
}

absl::Status NcclCommunicator::AllGather(const void* in, void* out, size_t bytes,
                                         std::chrono::milliseconds timeout) {
  if (bytes == 0) return absl::OkStatus();
  return Run("all-gather", timeout, [&] {
    return Check("ncclAllGather", api_.AllGather(in, out, bytes, ncclUint8, comm_, nccl_stream()));
  });
}

absl::Status NcclCommunicator::Send(const void* data, size_t bytes, int peer, uint64_t /*tag*/,
                                    std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckSend(peer));
  if (bytes == 0) return absl::OkStatus();
  return Run("send", timeout, [&] {
    return Check("ncclSend", api_.Send(data, bytes, ncclUint8, peer, comm_, nccl_stream()));
  });
}

absl::Status NcclCommunicator::Recv(void* data, size_t bytes, int peer, uint64_t /*tag*/,
                                    std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckRecv(peer));
  if (bytes == 0) return absl::OkStatus();
  return Run("recv", timeout, [&] {
    return Check("ncclRecv", api_.Recv(data, bytes, ncclUint8, peer, comm_, nccl_stream()));
  });
}

absl::Status NcclCommunicator::Barrier(std::chrono::milliseconds timeout) {
  // NCCL has no barrier: an all-reduce of one float completes only when every rank joined it.
  return Run("barrier", timeout, [&] {
    return Check("ncclAllReduce",
                 api_.AllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, nccl_stream()));
  });
}

absl::Status NcclCommunicator::SendMany(const std::vector<SendPart>& parts, uint64_t /*tag*/,
                                        std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckSendMany(parts));
  return Run("grouped send", timeout, [&]() -> absl::Status {
    DDPIO_RETURN_IF_ERROR(Check("ncclGroupStart", api_.GroupStart()));
    absl::Status sent;
    for (size_t i = 0; i < parts.size() && sent.ok(); ++i) {
      if (parts[i].bytes > 0) {
        sent = Check("ncclSend", api_.Send(parts[i].data, parts[i].bytes, ncclUint8, parts[i].peer,
                                           comm_, nccl_stream()));
      }
    }
    absl::Status ended = Check("ncclGroupEnd", api_.GroupEnd());  // always close the group
    return sent.ok() ? ended : sent;
  });
}

absl::Status NcclCommunicator::StageIn(void* dst, const void* src, size_t bytes) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "staging: communicator unusable after an earlier error (", broken_.message(), ")"));
  }
  if (bytes == 0) return absl::OkStatus();
  if (copy_stream_ == nullptr) {
    absl::StatusOr<void*> stream = cuda_->CreateStream();  // non-blocking
    if (!stream.ok()) return OnRank(stream.status());
    copy_stream_ = *stream;
    absl::StatusOr<void*> event = cuda_->CreateEvent();
    if (!event.ok()) return OnRank(event.status());
    staged_ = *event;
  }
  DDPIO_RETURN_IF_ERROR(
      OnRank(cuda_->CopyAsync(dst, src, bytes, device::CopyKind::kHostToDevice, copy_stream_)));
  DDPIO_RETURN_IF_ERROR(OnRank(cuda_->RecordEvent(staged_, copy_stream_)));
  return OnRank(cuda_->StreamWaitEvent(stream_, staged_));
}

absl::Status NcclCommunicator::CopyOut(void* dst, const void* src, size_t bytes,
                                       std::chrono::milliseconds timeout) {
  if (bytes == 0) return absl::OkStatus();
  // A copy into pageable memory returns only once it is done: first wait, under the timeout,
  // for whatever is queued before it, so that a stuck operation cannot block the call itself.
  DDPIO_RETURN_IF_ERROR(Synchronize(timeout));
  return Run("copy to the host", timeout, [&] {
    return OnRank(cuda_->CopyAsync(dst, src, bytes, device::CopyKind::kDeviceToHost, stream_));
  });
}

absl::Status NcclCommunicator::Synchronize(std::chrono::milliseconds timeout) {
  return Run("waiting for the staged copies", timeout, [] { return absl::OkStatus(); });
}

absl::Status NcclCommunicator::WaitFor(void* event) {
  if (event == nullptr) return absl::OkStatus();
  return OnRank(cuda_->StreamWaitEvent(stream_, event));
}

void NcclCommunicator::Abort() { (void)Fail(absl::AbortedError("aborted")); }

}  // namespace ddpio::comm
