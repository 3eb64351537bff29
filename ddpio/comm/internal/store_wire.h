// The TCP store's wire format, shared by its server and its client (protocol in tcp_store.h):
// message tags, little-endian writers, and a bounds-checked reader that fails instead of
// overrunning. Private to broadcast/.
#ifndef DDPIO_COMM_INTERNAL_STORE_WIRE_H_
#define DDPIO_COMM_INTERNAL_STORE_WIRE_H_

#include <cstdint>
#include <string>

namespace ddpio::comm::internal {

inline constexpr char kStoreHello[] = "DDPS1";
enum StoreOp : uint8_t { kStoreSet = 1, kStoreGet = 2, kStoreWait = 3, kStoreAdd = 4, kStoreCheck = 5 };
// kStoreFull: a SET or ADD refused because the store would pass its byte limit; unlike
// kStoreError, the connection stays open.
enum StoreReply : uint8_t { kStoreOk = 0, kStoreAbsent = 1, kStoreTimedOut = 2, kStoreError = 3, kStoreFull = 4 };

inline void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutI64(std::string* s, int64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
}
inline void PutStr(std::string* s, const std::string& v) {
  PutU32(s, static_cast<uint32_t>(v.size()));
  s->append(v);
}

// Reads fields from a message; any overrun is a false return, never a crash.
class WireReader {
 public:
  explicit WireReader(const std::string& s) : s_(s) {}
  bool U8(uint8_t* v) {
    if (pos_ + 1 > s_.size()) return false;
    *v = static_cast<uint8_t>(s_[pos_++]);
    return true;
  }
  bool U32(uint32_t* v) {
    if (s_.size() - pos_ < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<uint8_t>(s_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool I64(int64_t* v) {
    if (s_.size() - pos_ < 8) return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<uint8_t>(s_[pos_ + i])) << (8 * i);
    *v = static_cast<int64_t>(u);
    pos_ += 8;
    return true;
  }
  bool Str(std::string* v) {
    uint32_t n = 0;
    if (!U32(&n) || s_.size() - pos_ < n) return false;
    v->assign(s_, pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace ddpio::comm::internal

#endif  // DDPIO_COMM_INTERNAL_STORE_WIRE_H_
