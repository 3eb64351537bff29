// The NCCL calls the NCCL backend makes, and nothing else, behind one interface. (Its CUDA
// runtime calls go through the device module's device::CudaRuntime.)
//
// NcclCommunicator only ever calls NCCL through NcclApi, so
//   - unit tests hand it a gmock (nccl_communicator_test.cc) to check call sequences and error
//     mapping without a GPU, and
//   - SystemNcclApi() (nccl_api_system.cc) forwards to whatever defines the C functions at link
//     time: libnccl (opened on first use, device/lazy_nccl.cc) in ddpio, or the test-only stand-in
//     (tests/gpu_standin/) that implements them on host memory over Gloo, so multi-rank tests run
//     this backend on CPU.
// Types come from the real nccl.h (and cudaStream_t from cuda_runtime_api.h). Method names are
// the C names without the nccl prefix; arguments and results are passed through unchanged.
#ifndef DDPIO_COMM_NCCL_NCCL_API_H_
#define DDPIO_COMM_NCCL_NCCL_API_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>

namespace ddpio::comm {

class NcclApi {
 public:
  virtual ~NcclApi() = default;

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
