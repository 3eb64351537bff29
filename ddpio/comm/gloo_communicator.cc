#include "ddpio/comm/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/comm/internal/gloo_store.h"
#include "ddpio/comm/internal/socket.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::comm {
namespace {

absl::Status FromGloo(const std::exception& e, const char* what, int rank) {
  std::string message = absl::StrCat(what, " on rank ", rank, ": ", e.what());
  if (std::strstr(e.what(), "Timed out") != nullptr ||
      std::strstr(e.what(), "timed out") != nullptr ||
      std::strstr(e.what(), "not set within") != nullptr) {
    return absl::DeadlineExceededError(message);
  }
  return absl::UnavailableError(message);
}

}  // namespace

struct GlooCommunicator::State {
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::shared_ptr<gloo::transport::Device> device;
  uint32_t next_tag = 1;  // collectives, in lock-step on every rank
};

GlooCommunicator::GlooCommunicator(int rank, int size, std::unique_ptr<State> state)
    : rank_(rank), size_(size), state_(std::move(state)) {}

GlooCommunicator::~GlooCommunicator() = default;

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    std::shared_ptr<Store> store, int rank, int size, const GlooOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside a world of ", size));
  }
  internal::IgnoreSigpipe();  // a dead peer must become a Status, not kill the process
  auto state = std::make_unique<State>();
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    state->device = gloo::transport::tcp::CreateDevice(attr);
    state->context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // Before connecting: the mesh connect waits under the context's timeout, Gloo's default
    // (30 s) otherwise.
    state->context->setTimeout(options.timeout);
    internal::GlooStoreAdapter adapter(std::move(store), options.timeout);
    state->context->connectFullMesh(adapter, state->device);
  } catch (const std::exception& e) {
    return FromGloo(e, "connecting the Gloo mesh", rank);
  }
  return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(rank, size, std::move(state)));
}

template <typename Fn>
absl::Status GlooCommunicator::Run(const char* what, Fn fn) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": communicator unusable after an earlier error (", broken_.message(), ")"));
  }
  if (state_ == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(what, ": communicator aborted"));
  try {
    fn();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    broken_ = FromGloo(e, what, rank_);
    return broken_;
  }
}

absl::Status GlooCommunicator::Broadcast(void* data, size_t bytes, int root,
                                         std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckBroadcast(root));
  if (bytes == 0) return absl::OkStatus();
  return Run("broadcast", [&] {
    gloo::BroadcastOptions opts(state_->context);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(state_->next_tag++);
    opts.setTimeout(timeout);
    gloo::broadcast(opts);
  });
}

absl::Status GlooCommunicator::Scatter(const std::vector<const void*>& parts, void* out,
                                       size_t bytes, int root, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckScatter(parts, root));
  if (bytes == 0) return absl::OkStatus();
  return Run("scatter", [&] {
    gloo::ScatterOptions opts(state_->context);
    std::vector<uint8_t*> inputs;
    if (rank_ == root) {
      for (const void* p : parts)
        inputs.push_back(const_cast<uint8_t*>(static_cast<const uint8_t*>(p)));
      opts.setInputs(inputs, bytes);
    }
    opts.setOutput(static_cast<uint8_t*>(out), bytes);
    opts.setRoot(root);
    opts.setTag(state_->next_tag++);
    opts.setTimeout(timeout);
    gloo::scatter(opts);
  });
}

absl::Status GlooCommunicator::AllReduce(float* data, size_t count, ReduceOp op,
                                         std::chrono::milliseconds timeout) {
  if (count == 0) return absl::OkStatus();
  absl::Status st = Run("all-reduce", [&] {
    gloo::AllreduceOptions opts(state_->context);
    opts.setOutput(data, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(state_->next_tag++);
    opts.setTimeout(timeout);
    gloo::allreduce(opts);
  });
  if (st.ok() && op == ReduceOp::kAverage) {
    const float inv = 1.0f / static_cast<float>(size_);
    for (size_t i = 0; i < count; ++i) data[i] *= inv;
  }
  return st;
}

absl::Status GlooCommunicator::AllGather(const void* in, void* out, size_t bytes,
                                         std::chrono::milliseconds timeout) {
  if (bytes == 0) return absl::OkStatus();
  return Run("all-gather", [&] {
    gloo::AllgatherOptions opts(state_->context);
    opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), bytes);
    opts.setOutput(static_cast<uint8_t*>(out), bytes * size_);
    opts.setTag(state_->next_tag++);
    opts.setTimeout(timeout);
    gloo::allgather(opts);
  });
}

absl::Status GlooCommunicator::Send(const void* data, size_t bytes, int peer, uint64_t tag,
                                    std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckSend(peer));
  if (bytes == 0) return absl::OkStatus();
  return Run("send", [&] {
    auto buf = state_->context->createUnboundBuffer(const_cast<void*>(data), bytes);
    buf->send(peer, tag);
    buf->waitSend(timeout);
  });
}

absl::Status GlooCommunicator::Recv(void* data, size_t bytes, int peer, uint64_t tag,
                                    std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckRecv(peer));
  if (bytes == 0) return absl::OkStatus();
  return Run("recv", [&] {
    auto buf = state_->context->createUnboundBuffer(data, bytes);
    buf->recv(peer, tag);
    buf->waitRecv(timeout);
  });
}

absl::Status GlooCommunicator::SendChunked(const void* data, size_t bytes, size_t chunk, int peer,
                                           uint64_t tag, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckSendChunked(chunk, peer));
  if (bytes == 0) return absl::OkStatus();
  return Run("send", [&] {
    auto buf = state_->context->createUnboundBuffer(const_cast<void*>(data), bytes);
    size_t n = 0;
    for (size_t off = 0; off < bytes; off += chunk, ++n)
      buf->send(peer, tag, off, std::min(chunk, bytes - off));
    for (size_t k = 0; k < n; ++k) buf->waitSend(timeout);
  });
}

absl::Status GlooCommunicator::RecvChunked(void* data, size_t bytes, size_t chunk, int peer,
                                           uint64_t tag, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckRecvChunked(chunk, peer));
  if (bytes == 0) return absl::OkStatus();
  return Run("recv", [&] {
    auto buf = state_->context->createUnboundBuffer(data, bytes);
    size_t n = 0;
    for (size_t off = 0; off < bytes; off += chunk, ++n)
      buf->recv(peer, tag, off, std::min(chunk, bytes - off));
    for (size_t k = 0; k < n; ++k) buf->waitRecv(timeout);
  });
}

absl::Status GlooCommunicator::RecvForward(void* data, size_t bytes, size_t chunk, int from, int to,
                                           uint64_t tag, std::chrono::milliseconds timeout) {
  DDPIO_RETURN_IF_ERROR(CheckRecvForward(chunk, from, to));
  if (bytes == 0) return absl::OkStatus();
  return Run("forward", [&] {
    auto buf = state_->context->createUnboundBuffer(data, bytes);
    size_t n = 0;
    for (size_t off = 0; off < bytes; off += chunk, ++n)
      buf->recv(from, tag, off, std::min(chunk, bytes - off));
    // Receives complete in the order they were posted (one TCP stream per pair, matched FIFO
    // per slot), so the k-th completion is chunk k.
    for (size_t k = 0; k < n; ++k) {
      buf->waitRecv(timeout);
      const size_t off = k * chunk;
      buf->send(to, tag, off, std::min(chunk, bytes - off));
    }
    for (size_t k = 0; k < n; ++k) buf->waitSend(timeout);
  });
}

absl::Status GlooCommunicator::Barrier(std::chrono::milliseconds timeout) {
  return Run("barrier", [&] {
    gloo::BarrierOptions opts(state_->context);
    opts.setTag(state_->next_tag++);
    opts.setTimeout(timeout);
    gloo::barrier(opts);
  });
}

void GlooCommunicator::Abort() {
  // Destroying the context and device closes every connection: peers blocked on this rank get
  // "connection closed" at once instead of waiting for their timeout.
  state_.reset();
  if (broken_.ok()) broken_ = absl::AbortedError("aborted");
}

}  // namespace ddpio::comm
