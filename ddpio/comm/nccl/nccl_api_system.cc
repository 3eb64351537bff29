// The only file that calls NCCL by name. Bound in ddpio to libnccl, opened on first use
// (device/lazy_nccl.cc), and in the stand-in
// tests against tests/gpu_standin.
#include "ddpio/comm/nccl/nccl_api.h"

namespace ddpio::comm {
namespace {

class SystemApi final : public NcclApi {
 public:
  ncclResult_t GetUniqueId(ncclUniqueId* id) override { return ncclGetUniqueId(id); }
  ncclResult_t CommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                  ncclConfig_t* config) override {
    return ncclCommInitRankConfig(comm, nranks, id, rank, config);
  }
  ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) override {
    return ncclCommGetAsyncError(comm, async_error);
  }
  ncclResult_t CommAbort(ncclComm_t comm) override { return ncclCommAbort(comm); }
  ncclResult_t CommDestroy(ncclComm_t comm) override { return ncclCommDestroy(comm); }
  ncclResult_t Broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t stream) override {
    return ncclBroadcast(send, recv, count, type, root, comm, stream);
  }
  ncclResult_t AllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override {
    return ncclAllReduce(send, recv, count, type, op, comm, stream);
  }
  ncclResult_t AllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                         ncclComm_t comm, cudaStream_t stream) override {
    return ncclAllGather(send, recv, count, type, comm, stream);
  }
  ncclResult_t Send(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t stream) override {
    return ncclSend(send, count, type, peer, comm, stream);
  }
  ncclResult_t Recv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t stream) override {
    return ncclRecv(recv, count, type, peer, comm, stream);
  }
  ncclResult_t GroupStart() override { return ncclGroupStart(); }
  ncclResult_t GroupEnd() override { return ncclGroupEnd(); }
  const char* GetErrorString(ncclResult_t result) override { return ncclGetErrorString(result); }
  const char* GetLastError(ncclComm_t comm) override { return ncclGetLastError(comm); }
};

}  // namespace

NcclApi& SystemNcclApi() {
  static SystemApi* api = new SystemApi();  // never destroyed: usable during static teardown
  return *api;
}

}  // namespace ddpio::comm
