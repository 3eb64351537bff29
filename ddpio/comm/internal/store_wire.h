// The TCP store's wire format, shared by its server and its client (protocol in tcp_store.h):
// the hello and the message tags. Fields are encoded with common/coding.h (PutFixed32,
// PutLengthPrefixed; ByteReader to parse). Private to comm/.
#ifndef DDPIO_COMM_INTERNAL_STORE_WIRE_H_
#define DDPIO_COMM_INTERNAL_STORE_WIRE_H_

#include <cstdint>

namespace ddpio::comm::internal {

inline constexpr char kStoreHello[] = "DDPS1";
enum StoreOp : uint8_t {
  kStoreSet = 1,
  kStoreGet = 2,
  kStoreWait = 3,
  kStoreAdd = 4,
  kStoreCheck = 5
};
// kStoreFull: a SET or ADD refused because the store would pass its byte limit; unlike
// kStoreError, the connection stays open.
enum StoreReply : uint8_t {
  kStoreOk = 0,
  kStoreAbsent = 1,
  kStoreTimedOut = 2,
  kStoreError = 3,
  kStoreFull = 4
};

}  // namespace ddpio::comm::internal

#endif  // DDPIO_COMM_INTERNAL_STORE_WIRE_H_
