// Test-only stand-in for the NCCL functions ddpio's NCCL backend calls: the collectives run over
// Gloo on loopback, on the CUDA stand-in's streams (cuda_standin.cc). Linked into the NCCL backend
// tests in place of libnccl, so multi-rank tests run the backend's own logic (unique-id exchange,
// non-blocking init, polling, asynchronous errors, abort) on CPU. Never installed, never linked
// into ddpio.
//
// It includes the real nccl.h, so a signature that drifts from the real library fails to compile.
// What it models of the real semantics:
//   - ncclGetUniqueId starts a rendezvous server in the calling process; the id carries its port
//     and a random token (like NCCL's id carries the root's bootstrap address);
//   - a non-blocking communicator (config.blocking = 0) initialises in the background:
//     ncclCommInitRankConfig returns ncclInProgress and ncclCommGetAsyncError reports
//     ncclInProgress until it is done;
//   - operations are enqueued on the stream and run later; a peer's failure shows as
//     ncclRemoteError from ncclCommGetAsyncError (the stream itself completes, as a real NCCL
//     kernel does once the communicator is aborted);
//   - ncclCommAbort closes the connections, which makes operations still waiting on peers fail,
//     and returns at once;
//   - ncclGroupStart/End: the sends and receives of a group are posted together, then waited for.
// Supported subset: AllReduce of float32 with sum or avg (avg as NCCL's PreMulSum: each input
// times float(1/n), then summed); the data types' sizes below. Every buffer must be device memory
// (cudaMalloc's, standin.h's IsDeviceMemory): host memory is refused.

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
#include "tests/gpu_standin/standin.h"

namespace {

constexpr char kIdMagic[] = "DDPIO-NCCL-STANDIN";
constexpr std::chrono::minutes kGlooTimeout(10);  // the backend's own timeout + abort governs

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

bool IsDevice(const void* p, size_t bytes) { return ddpio::standin::IsDeviceMemory(p, bytes); }

ncclResult_t PointToPoint(bool send, void* buff, size_t count, ncclDataType_t type, int peer,
                          ncclComm_t comm, cudaStream_t stream);

}  // namespace

struct ncclComm {
  std::shared_ptr<CommState> state;
};

namespace {

void Enqueue(cudaStream_t stream, std::shared_ptr<CommState> comm,
             std::function<void(const std::shared_ptr<gloo::rendezvous::Context>&)> op) {
  ddpio::standin::Enqueue(stream, [comm, op = std::move(op)] {
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

}  // namespace

extern "C" {

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
