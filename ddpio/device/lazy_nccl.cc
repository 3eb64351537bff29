// The NCCL functions ddpio calls, opened on first use (lazy_library.h). Linked into ddpio in
// place of libnccl; the NCCL stand-in (tests/gpu_standin/nccl_standin.cc) overrides them in
// tests. When NCCL does not load, every call returns ncclSystemError and the error strings say
// which library and why.
#include <nccl.h>

#include "ddpio/device/gpu_libraries.h"
#include "ddpio/device/internal/lazy_forward.h"

namespace {

using ddpio::device::NcclLibrary;
constexpr ncclResult_t kMissing = ncclSystemError;

}  // namespace

extern "C" {

DDPIO_LAZY_WEAK ncclResult_t ncclGetVersion(int* version) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclGetVersion, kMissing, version);
}
DDPIO_LAZY_WEAK ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclGetUniqueId, kMissing, id);
}
DDPIO_LAZY_WEAK ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                                    int rank, ncclConfig_t* config) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclCommInitRankConfig, kMissing, comm, nranks, id, rank,
                     config);
}
DDPIO_LAZY_WEAK ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclCommGetAsyncError, kMissing, comm, async_error);
}
DDPIO_LAZY_WEAK ncclResult_t ncclCommAbort(ncclComm_t comm) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclCommAbort, kMissing, comm);
}
DDPIO_LAZY_WEAK ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclCommDestroy, kMissing, comm);
}
DDPIO_LAZY_WEAK ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count,
                                           ncclDataType_t type, int root, ncclComm_t comm,
                                           cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclBroadcast, kMissing, send, recv, count, type, root, comm,
                     stream);
}
DDPIO_LAZY_WEAK ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count,
                                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclAllReduce, kMissing, send, recv, count, type, op, comm,
                     stream);
}
DDPIO_LAZY_WEAK ncclResult_t ncclAllGather(const void* send, void* recv, size_t count,
                                           ncclDataType_t type, ncclComm_t comm,
                                           cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclAllGather, kMissing, send, recv, count, type, comm, stream);
}
DDPIO_LAZY_WEAK ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer,
                                      ncclComm_t comm, cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclSend, kMissing, send, count, type, peer, comm, stream);
}
DDPIO_LAZY_WEAK ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer,
                                      ncclComm_t comm, cudaStream_t stream) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclRecv, kMissing, recv, count, type, peer, comm, stream);
}
DDPIO_LAZY_WEAK ncclResult_t ncclGroupStart() {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclGroupStart, kMissing);
}
DDPIO_LAZY_WEAK ncclResult_t ncclGroupEnd() {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclGroupEnd, kMissing);
}
DDPIO_LAZY_WEAK const char* ncclGetErrorString(ncclResult_t result) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclGetErrorString, NcclLibrary().error(), result);
}
DDPIO_LAZY_WEAK const char* ncclGetLastError(ncclComm_t comm) {
  DDPIO_LAZY_FORWARD(NcclLibrary(), ncclGetLastError, NcclLibrary().error(), comm);
}

}  // extern "C"
