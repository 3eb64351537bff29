// The NCCL and CUDA runtime calls the NCCL backend makes, and nothing else, behind one interface.
//
// NcclCommunicator only ever calls through NcclApi, so
//   - unit tests hand it a gmock (nccl_communicator_test.cc) to check call sequences and error
//     mapping without a GPU, and
//   - SystemNcclApi() (nccl_api_system.cc) forwards to whatever defines the C functions at link
//     time: libnccl + libcudart in ddpio, or the test-only stand-in (tests/nccl_standin/) that
//     implements them on host memory over Gloo, so multi-rank tests run this backend on CPU.
// Types come from the real nccl.h and cuda_runtime_api.h. Method names are the C names without
// the nccl/cuda prefix; arguments and results are passed through unchanged.
#ifndef DDPIO_COMM_NCCL_NCCL_API_H_
#define DDPIO_COMM_NCCL_NCCL_API_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>

namespace ddpio::comm {

class NcclApi {
 public:
  virtual ~NcclApi() = default;

  // CUDA runtime.
  virtual cudaError_t GetDeviceCount(int* count) = 0;
  virtual cudaError_t SetDevice(int device) = 0;
  virtual cudaError_t StreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) = 0;
  virtual cudaError_t StreamDestroy(cudaStream_t stream) = 0;
  // cudaSuccess when all work queued on `stream` has finished, cudaErrorNotReady while it runs.
  virtual cudaError_t StreamQuery(cudaStream_t stream) = 0;
  // cudaGetLastError: returns and clears the calling thread's last CUDA error. A query that says
  // cudaErrorNotReady may leave that code there (PyTorch clears it for this reason), and the next
  // kernel launch checked with cudaGetLastError would report it as its own failure.
  virtual cudaError_t CudaGetLastError() = 0;
  virtual cudaError_t Malloc(void** ptr, size_t bytes) = 0;
  virtual cudaError_t Free(void* ptr) = 0;
  virtual cudaError_t MemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                  cudaStream_t stream) = 0;
  virtual cudaError_t EventCreateWithFlags(cudaEvent_t* event, unsigned int flags) = 0;
  virtual cudaError_t EventDestroy(cudaEvent_t event) = 0;
  virtual cudaError_t EventRecord(cudaEvent_t event, cudaStream_t stream) = 0;
  // Work queued on `stream` after this call waits for the event's last record before it.
  virtual cudaError_t StreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) = 0;
  virtual const char* CudaErrorString(cudaError_t error) = 0;

  // NCCL.
  virtual ncclResult_t GetUniqueId(ncclUniqueId* id) = 0;
  virtual ncclResult_t CommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                          ncclConfig_t* config) = 0;
  virtual ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) = 0;
  virtual ncclResult_t CommAbort(ncclComm_t comm) = 0;
  virtual ncclResult_t CommDestroy(ncclComm_t comm) = 0;
  virtual ncclResult_t Broadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                                 int root, ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t AllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t AllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                                 ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t Send(const void* send, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t Recv(void* recv, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t GroupStart() = 0;
  virtual ncclResult_t GroupEnd() = 0;
  virtual const char* GetErrorString(ncclResult_t result) = 0;
  virtual const char* GetLastError(ncclComm_t comm) = 0;
};

// Forwards every call to the C function of the same name (process-wide singleton).
NcclApi& SystemNcclApi();

}  // namespace ddpio::comm

#endif  // DDPIO_COMM_NCCL_NCCL_API_H_
