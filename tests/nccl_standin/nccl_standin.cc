// Test-only stand-in for the NCCL and CUDA runtime functions ddpio's NCCL backend calls: "device"
// memory is host memory, a stream is a thread running its queue in order, and the collectives
// run over Gloo on loopback. Linked into the NCCL backend tests in place of libnccl/libcudart, so
// multi-rank tests run the backend's own logic (unique-id exchange, non-blocking init, polling,
// asynchronous errors, abort) on CPU. Never installed, never linked into ddpio.
//
// It includes the real nccl.h and cuda_runtime_api.h, so a signature that drifts from the real
// libraries fails to compile. What it models of the real semantics:
//   - ncclGetUniqueId starts a rendezvous server in the calling process; the id carries its port
//     and a random token (like NCCL's id carries the root's bootstrap address);
//   - a non-blocking communicator (config.blocking = 0) initialises in the background:
//     ncclCommInitRankConfig returns ncclInProgress and ncclCommGetAsyncError reports
//     ncclInProgress until it is done;
//   - operations are enqueued on the stream and run later; cudaStreamQuery says cudaErrorNotReady
//     while they run; a peer's failure shows as ncclRemoteError from ncclCommGetAsyncError (the
//     stream itself completes, as a real NCCL kernel does once the communicator is aborted);
//   - ncclCommAbort closes the connections, which makes operations still waiting on peers fail,
//     and returns at once; cudaStreamDestroy does not wait for work still queued;
//   - ncclGroupStart/End: the sends and receives of a group are posted together, then waited for;
//   - events: cudaEventRecord puts a numbered marker on the stream; cudaStreamWaitEvent makes the
//     waiting stream's later work wait for the marker recorded last before the call, so a copy
//     on one stream really is ordered before a send on another.
// Environment: DDPIO_NCCL_STANDIN_DEVICES = number of devices (default 1; 0 → cudaErrorNoDevice;
// "nodriver" → cudaErrorInsufficientDriver); DDPIO_NCCL_STANDIN_DEVICE_BYTES = device memory.
// Supported subset: AllReduce of float32 with sum or avg (avg as NCCL's PreMulSum: each input
// times float(1/n), then summed); the data types' sizes below. Every buffer handed to a
// collective, a copy, cuBLAS or a kernel must be what cudaMalloc returned (or lie inside it) on
// the device side: host memory is refused, as the real libraries would fault on it.
#include <cuda_runtime_api.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddpio/comm/internal/gloo_store.h"
#include "ddpio/comm/internal/socket.h"
#include "ddpio/comm/tcp_store.h"
#include "tests/nccl_standin/standin_stream.h"

namespace {

constexpr char kIdMagic[] = "DDPIO-NCCL-STANDIN";
constexpr std::chrono::minutes kGlooTimeout(10);  // the backend's own timeout + abort governs
constexpr std::chrono::microseconds kCopyLatency(200);

// A queue of host tasks run in order by one thread; shared with that thread, so destroying the
// stream never waits for it.
struct StreamState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool running = false;
  bool stop = false;

  static void Loop(std::shared_ptr<StreamState> s) {
    std::unique_lock<std::mutex> lock(s->mu);
    for (;;) {
      s->cv.wait(lock, [&] { return s->stop || !s->queue.empty(); });
      if (s->queue.empty()) return;
      auto task = std::move(s->queue.front());
      s->queue.pop_front();
      s->running = true;
      lock.unlock();
      task();
      lock.lock();
      s->running = false;
    }
  }
  void Push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(task));
    }
    cv.notify_all();
  }
  bool Idle() {
    std::lock_guard<std::mutex> lock(mu);
    return queue.empty() && !running;
  }
};

struct CommState {
  int rank = 0;
  int nranks = 0;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::mutex mu;  // guards state, last_error, context (set once by init)
  ncclResult_t state = ncclInProgress;
  std::string last_error;
  // Host-side enqueue order is the same on every rank: it numbers collectives and, per peer,
  // point-to-point messages.
  uint32_t next_tag = 1;
  std::vector<uint64_t> sent, received;
  // The rendezvous server of the id, when this process made it: lives as long as the
  // communicator (joined threads and all), like NCCL's bootstrap root.
  std::unique_ptr<ddpio::comm::TcpStoreServer> server;

  void Fail(ncclResult_t r, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (state == ncclSuccess || state == ncclInProgress) {
      state = r;
      last_error = why;
    }
  }
  ncclResult_t State() {
    std::lock_guard<std::mutex> lock(mu);
    return state;
  }
  std::shared_ptr<gloo::rendezvous::Context> Context() {
    std::lock_guard<std::mutex> lock(mu);
    return context;
  }
};

size_t SizeOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

// Runs `op` against the communicator's Gloo context on the stream, turning Gloo's exceptions
// into the communicator's asynchronous error.
void Enqueue(cudaStream_t stream, std::shared_ptr<CommState> comm,
             std::function<void(const std::shared_ptr<gloo::rendezvous::Context>&)> op);

// One operation of a group: posted first, waited for after every operation was posted.
struct Posted {
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  bool send;
};
struct GroupOp {
  std::shared_ptr<CommState> comm;
  cudaStream_t stream;
  std::function<void(gloo::rendezvous::Context&, std::vector<Posted>*)> post;
};
thread_local int group_depth = 0;
thread_local std::vector<GroupOp> group_ops;

// Servers started by ncclGetUniqueId, until the communicator made from the id takes them.
std::mutex servers_mu;
std::map<std::string, std::unique_ptr<ddpio::comm::TcpStoreServer>>* servers =
    new std::map<std::string, std::unique_ptr<ddpio::comm::TcpStoreServer>>();

// "Device" memory: what cudaMalloc handed out, so that the collectives, copies, cuBLAS and the
// kernels refuse host memory, on which the real ones would fault.
std::mutex device_mu;
std::map<uintptr_t, size_t>* device_ranges = new std::map<uintptr_t, size_t>();

bool IsDevice(const void* p, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(device_mu);
  auto it = device_ranges->upper_bound(a);
  if (it == device_ranges->begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

int DeviceCount(cudaError_t* err) {
  const char* env = std::getenv("DDPIO_NCCL_STANDIN_DEVICES");
  std::string v = env == nullptr ? "1" : env;
  if (v == "nodriver") {
    *err = cudaErrorInsufficientDriver;
    return 0;
  }
  int n = std::atoi(v.c_str());
  *err = n > 0 ? cudaSuccess : cudaErrorNoDevice;
  return n;
}

ncclResult_t PointToPoint(bool send, void* buff, size_t count, ncclDataType_t type, int peer,
                          ncclComm_t comm, cudaStream_t stream);

}  // namespace

struct CUstream_st {
  std::shared_ptr<StreamState> state;
};

struct ncclComm {
  std::shared_ptr<CommState> state;
};

// An event: each record is a numbered marker its stream completes in order; a wait (host or
// stream) is for the number recorded when the wait was made, as CUDA specifies.
// The state is shared with the stream tasks that complete or wait for it, so destroying an
// event with work pending (which CUDA allows) frees nothing still in use.
struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;
  uint64_t completed = 0;
};
struct CUevent_st {
  std::shared_ptr<EventState> state;
};

namespace {

StreamState& DefaultStream() {
  static auto* s = [] {
    auto st = std::make_shared<StreamState>();
    std::thread(StreamState::Loop, st).detach();
    return new std::shared_ptr<StreamState>(st);
  }();
  return **s;
}

StreamState& StateOf(cudaStream_t stream) {
  return stream == nullptr ? DefaultStream() : *stream->state;
}

void Enqueue(cudaStream_t stream, std::shared_ptr<CommState> comm,
             std::function<void(const std::shared_ptr<gloo::rendezvous::Context>&)> op) {
  StateOf(stream).Push([comm, op = std::move(op)] {
    if (comm->State() != ncclSuccess) return;  // aborted or failed: NCCL kernels exit too
    auto context = comm->Context();
    try {
      op(context);
    } catch (const std::exception& e) {
      comm->Fail(ncclRemoteError, e.what());
    }
  });
}

// Stops the id's rendezvous server now rather than when the last queued operation lets go of
// the state: every rank has long finished the rendezvous by then.
void StopServer(CommState& state) {
  std::unique_ptr<ddpio::comm::TcpStoreServer> server;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    server = std::move(state.server);
  }
}

bool Usable(ncclComm_t comm) { return comm != nullptr && comm->state != nullptr; }

// ncclInvalidArgument, with the reason in ncclGetLastError, for a buffer not in device memory.
ncclResult_t HostPointer(ncclComm_t comm, const char* what) {
  std::lock_guard<std::mutex> lock(comm->state->mu);
  comm->state->last_error =
      std::string("the stand-in: ") + what + " got a pointer that is not device memory";
  return ncclInvalidArgument;
}

ncclResult_t PointToPoint(bool send, void* buff, size_t count, ncclDataType_t type, int peer,
                          ncclComm_t comm, cudaStream_t stream) {
  if (!Usable(comm)) return ncclInvalidArgument;
  auto c = comm->state;
  const size_t bytes = count * SizeOf(type);
  if (bytes > 0 && !IsDevice(buff, bytes)) return HostPointer(comm, send ? "ncclSend" : "ncclRecv");
  if (SizeOf(type) == 0 || peer < 0 || peer >= c->nranks || peer == c->rank)
    return ncclInvalidArgument;
  const uint64_t seq = send ? c->sent[peer]++ : c->received[peer]++;
  const uint64_t slot = (uint64_t{0xEE} << 56) | seq;
  GroupOp op{c, stream, [=](gloo::rendezvous::Context& ctx, std::vector<Posted>* posted) {
               auto buf = ctx.createUnboundBuffer(buff, bytes);
               if (send) {
                 buf->send(peer, slot);
               } else {
                 buf->recv(peer, slot);
               }
               posted->push_back({std::move(buf), send});
             }};
  if (group_depth > 0) {
    group_ops.push_back(std::move(op));
    return ncclSuccess;
  }
  group_ops.push_back(std::move(op));
  group_depth = 1;
  return ncclGroupEnd();
}

// The calling thread's last error. The real runtime may leave cudaErrorNotReady there after a
// query (PyTorch clears it for that reason); the stand-in always does, so that code which does not
// clear it fails its next checked kernel launch (kernels_standin.cc) here as it could on a GPU.
thread_local cudaError_t last_error = cudaSuccess;

}  // namespace

namespace ddpio::standin {

void Enqueue(cudaStream_t stream, std::function<void()> work) {
  StateOf(stream).Push(std::move(work));
}

bool IsDeviceMemory(const void* p, size_t bytes) { return IsDevice(p, bytes); }

}  // namespace ddpio::standin

// ---- CUDA runtime ----

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  cudaError_t err;
  int n = DeviceCount(&err);
  if (err == cudaSuccess) *count = n;
  return err;
}

cudaError_t cudaSetDevice(int device) {
  cudaError_t err;
  int n = DeviceCount(&err);
  if (err != cudaSuccess) return err;
  return device >= 0 && device < n ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int /*flags*/) {
  auto* s = new CUstream_st{std::make_shared<StreamState>()};
  std::thread(StreamState::Loop, s->state).detach();
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return cudaErrorInvalidResourceHandle;
  {
    std::lock_guard<std::mutex> lock(stream->state->mu);
    stream->state->stop = true;  // the thread finishes what is queued, then ends
  }
  stream->state->cv.notify_all();
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (StateOf(stream).Idle()) return cudaSuccess;
  last_error = cudaErrorNotReady;
  return cudaErrorNotReady;
}

cudaError_t cudaGetLastError() { return std::exchange(last_error, cudaSuccess); }

cudaError_t cudaPeekAtLastError() { return last_error; }

// DDPIO_NCCL_STANDIN_DEVICE_BYTES: the device's memory; an allocation past it fails as
// out-of-memory (unset: no limit).
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (const char* limit = std::getenv("DDPIO_NCCL_STANDIN_DEVICE_BYTES"); limit != nullptr) {
    size_t used = 0;
    std::lock_guard<std::mutex> lock(device_mu);
    for (const auto& [start, size] : *device_ranges) used += size;
    if (used + bytes > std::strtoull(limit, nullptr, 10)) return cudaErrorMemoryAllocation;
  }
  const size_t rounded = (bytes + 255) / 256 * 256;
  *ptr = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
  if (*ptr == nullptr) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(device_mu);
  (*device_ranges)[reinterpret_cast<uintptr_t>(*ptr)] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(device_mu);
    if (device_ranges->erase(reinterpret_cast<uintptr_t>(ptr)) == 0) return cudaErrorInvalidValue;
  }
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  const bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (bytes > 0 && (IsDevice(dst, bytes) != to_device || IsDevice(src, bytes) != from_device)) {
    return cudaErrorInvalidValue;  // a copy whose direction does not match its pointers
  }
  // A copy takes a while, as a DMA does: work not ordered after it (by its stream or an event)
  // reads the old bytes, so a missing cudaStreamWaitEvent shows in tests.
  StateOf(stream).Push([=] {
    std::this_thread::sleep_for(kCopyLatency);
    std::memmove(dst, src, bytes);
  });
  return cudaSuccess;
}

// Page-locked host memory is host memory.
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int /*flags*/) {
  *ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (bytes > 0 && !IsDevice(dst, bytes)) return cudaErrorInvalidValue;
  StateOf(stream).Push([=] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> waited = done->get_future();
  StateOf(stream).Push([done] { done->set_value(); });
  waited.wait();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  *event = new CUevent_st{std::make_shared<EventState>()};
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<EventState> e = event->state;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    n = ++e->recorded;
  }
  StateOf(stream).Push([e, n] {
    {
      std::lock_guard<std::mutex> lock(e->mu);
      if (n > e->completed) e->completed = n;
    }
    e->cv.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<EventState> e = event->state;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    n = e->recorded;
  }
  StateOf(stream).Push([e, n] {
    std::unique_lock<std::mutex> lock(e->mu);
    e->cv.wait(lock, [&] { return e->completed >= n; });
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<EventState> e = event->state;
  std::unique_lock<std::mutex> lock(e->mu);
  const uint64_t n = e->recorded;
  e->cv.wait(lock, [&] { return e->completed >= n; });
  return cudaSuccess;
}

const char* cudaGetErrorName(cudaError_t error) {
  return error == cudaSuccess ? "cudaSuccess" : "cudaErrorStandIn";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    default:
      return "stand-in CUDA error";
  }
}

// ---- NCCL ----

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  const std::string token = ddpio::comm::RandomToken();
  auto server = ddpio::comm::TcpStoreServer::Start("127.0.0.1", 0, token);
  if (!server.ok()) return ncclSystemError;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::snprintf(id->internal, sizeof(id->internal), "%s %d %s", kIdMagic, (*server)->port(),
                token.c_str());
  std::lock_guard<std::mutex> lock(servers_mu);
  (*servers)[token] = std::move(server).value();
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  char magic[32] = {0}, token[40] = {0};
  int port = 0;
  id.internal[sizeof(id.internal) - 1] = '\0';
  if (std::sscanf(id.internal, "%31s %d %39s", magic, &port, token) != 3 ||
      std::strcmp(magic, kIdMagic) != 0) {
    return ncclInvalidArgument;
  }
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  state->nranks = nranks;
  state->sent.assign(nranks, 0);
  state->received.assign(nranks, 0);
  std::string tok = token;
  {
    std::lock_guard<std::mutex> lock(servers_mu);
    if (auto it = servers->find(tok); it != servers->end()) {
      state->server = std::move(it->second);  // before any other thread sees the state
      servers->erase(it);
    }
  }
  ddpio::comm::internal::IgnoreSigpipe();  // Gloo writes with write(2); NCCL does not die of
                                           // SIGPIPE
  auto init = [state, port, tok] {
    auto client =
        ddpio::comm::TcpStoreClient::Connect("127.0.0.1", port, tok, std::chrono::seconds(60));
    if (!client.ok()) {
      state->Fail(ncclSystemError, std::string(client.status().message()));
      return;
    }
    try {
      gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(state->rank, state->nranks);
      context->setTimeout(kGlooTimeout);
      ddpio::comm::internal::GlooStoreAdapter adapter(
          std::shared_ptr<ddpio::comm::Store>(std::move(client).value()), std::chrono::seconds(60));
      context->connectFullMesh(adapter, device);
      std::lock_guard<std::mutex> lock(state->mu);
      state->device = device;
      state->context = context;
      if (state->state == ncclInProgress) state->state = ncclSuccess;
    } catch (const std::exception& e) {
      state->Fail(ncclSystemError, e.what());
    }
  };
  *comm = new ncclComm{state};
  const bool blocking = config == nullptr || config->blocking != 0;
  if (blocking) {
    init();
    return state->State();
  }
  std::thread(init).detach();
  return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (!Usable(comm)) return ncclInvalidArgument;
  *async_error = comm->state->State();
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  auto state = comm->state;
  state->Fail(ncclRemoteError, "communicator aborted");
  if (auto context = state->Context()) context->closeConnections();
  StopServer(*state);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  // Operations still queued hold their own reference to the state.
  StopServer(*comm->state);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  if (!Usable(comm) || SizeOf(type) == 0 || root < 0 || root >= comm->state->nranks)
    return ncclInvalidArgument;
  const size_t bytes = count * SizeOf(type);
  const bool is_root = comm->state->rank == root;
  if (bytes > 0 && (!IsDevice(recv, bytes) || (is_root && !IsDevice(send, bytes)))) {
    return HostPointer(comm, "ncclBroadcast");
  }
  const uint32_t tag = comm->state->next_tag++;
  Enqueue(stream, comm->state, [=](const std::shared_ptr<gloo::rendezvous::Context>& ctx) {
    if (is_root && send != recv) std::memmove(recv, send, bytes);
    gloo::BroadcastOptions opts(ctx);
    opts.setOutput(static_cast<uint8_t*>(recv), bytes);
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(kGlooTimeout);
    gloo::broadcast(opts);
  });
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (!Usable(comm)) return ncclInvalidArgument;
  if (type != ncclFloat32 || (op != ncclSum && op != ncclAvg)) {
    std::lock_guard<std::mutex> lock(comm->state->mu);
    comm->state->last_error = "the stand-in reduces float32 with sum or avg only";
    return ncclInvalidArgument;
  }
  if (count > 0 &&
      (!IsDevice(send, count * sizeof(float)) || !IsDevice(recv, count * sizeof(float)))) {
    return HostPointer(comm, "ncclAllReduce");
  }
  const uint32_t tag = comm->state->next_tag++;
  const int n = comm->state->nranks;
  Enqueue(stream, comm->state, [=](const std::shared_ptr<gloo::rendezvous::Context>& ctx) {
    float* out = static_cast<float*>(recv);
    if (send != recv) std::memmove(out, send, count * sizeof(float));
    if (op ==
        ncclAvg) {  // NCCL's average is a PreMulSum: every input times float(1/n), then the sum
      const float inv = 1.0f / static_cast<float>(n);
      for (size_t i = 0; i < count; ++i) out[i] *= inv;
    }
    gloo::AllreduceOptions opts(ctx);
    opts.setOutput(out, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(tag);
    opts.setTimeout(kGlooTimeout);
    gloo::allreduce(opts);
  });
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  if (!Usable(comm) || SizeOf(type) == 0) return ncclInvalidArgument;
  const size_t bytes = count * SizeOf(type);
  const int n = comm->state->nranks;
  if (bytes > 0 && (!IsDevice(send, bytes) || !IsDevice(recv, bytes * n)))
    return HostPointer(comm, "ncclAllGather");
  const uint32_t tag = comm->state->next_tag++;
  Enqueue(stream, comm->state, [=](const std::shared_ptr<gloo::rendezvous::Context>& ctx) {
    gloo::AllgatherOptions opts(ctx);
    opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(send)), bytes);
    opts.setOutput(static_cast<uint8_t*>(recv), bytes * n);
    opts.setTag(tag);
    opts.setTimeout(kGlooTimeout);
    gloo::allgather(opts);
  });
  return ncclSuccess;
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return PointToPoint(true, const_cast<void*>(send), count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return PointToPoint(false, recv, count, type, peer, comm, stream);
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth <= 0) return ncclInvalidUsage;
  if (--group_depth > 0) return ncclSuccess;
  std::vector<GroupOp> ops = std::move(group_ops);
  group_ops.clear();
  if (ops.empty()) return ncclSuccess;
  for (const GroupOp& op : ops) {
    if (op.comm != ops[0].comm || op.stream != ops[0].stream)
      return ncclInvalidUsage;  // not modelled
  }
  Enqueue(ops[0].stream, ops[0].comm, [ops](const std::shared_ptr<gloo::rendezvous::Context>& ctx) {
    std::vector<Posted> posted;
    for (const GroupOp& op : ops) op.post(*ctx, &posted);
    for (Posted& p : posted) {
      if (p.send) {
        p.buffer->waitSend(kGlooTimeout);
      } else {
        p.buffer->waitRecv(kGlooTimeout);
      }
    }
  });
  return ncclSuccess;
}

// The version of the nccl.h it was compiled against, as libnccl reports its own.
ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  thread_local std::string copy;
  if (!Usable(comm)) return "";
  std::lock_guard<std::mutex> lock(comm->state->mu);
  copy = comm->state->last_error;
  return copy.c_str();
}

}  // extern "C"
