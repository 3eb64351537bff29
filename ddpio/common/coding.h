// The one byte codec for every format ddpio writes or parses: fixed-width little-endian integers
// and floats (records, feed messages, checkpoints, the store protocol and its frames, segment
// offsets), the big-endian fields of formats that say big-endian (JPEG marker lengths, LMDB index
// keys that sort by index), and a bounds-checked reader for parsing untrusted bytes. The code says
// the byte order its format says, whatever the host's. Header-only; every function is pure and
// thread-safe.
//
//   std::string out;  PutFixed32(&out, 7);  PutLe(&out, 1.5f);  PutLengthPrefixed(&out, "key");
//   ByteReader r(out);  uint32_t n;  float f;  std::string key;
//   if (!r.Le(&n) || !r.Le(&f) || !r.LengthPrefixed(&key)) { /* truncated */ }
#ifndef DDPIO_COMMON_CODING_H_
#define DDPIO_COMMON_CODING_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ddpio {

namespace coding_internal {
template <typename T>
using UintOf =
    std::conditional_t<sizeof(T) == 1, uint8_t,
                       std::conditional_t<sizeof(T) == 2, uint16_t,
                                          std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

template <typename T>
constexpr bool kFixedWidth = std::is_arithmetic_v<T> &&
                             (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
}  // namespace coding_internal

// Little-endian, any width. `T` is an integer or float of 1, 2, 4 or 8 bytes; `dst` / `p` hold
// sizeof(T) bytes.
template <typename T>
void EncodeLe(void* dst, T v) {
  static_assert(coding_internal::kFixedWidth<T>);
  coding_internal::UintOf<T> u;
  std::memcpy(&u, &v, sizeof(T));
  auto* b = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < sizeof(T); ++i) b[i] = static_cast<uint8_t>(u >> (8 * i));
}

template <typename T>
T GetLe(const void* p) {
  static_assert(coding_internal::kFixedWidth<T>);
  const auto* b = static_cast<const uint8_t*>(p);
  coding_internal::UintOf<T> u = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    u |= static_cast<coding_internal::UintOf<T>>(b[i]) << (8 * i);
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

// Appends `v` little-endian.
template <typename T>
void PutLe(std::string* out, T v) {
  char b[sizeof(T)];
  EncodeLe(b, v);
  out->append(b, sizeof(T));
}

// Appends every element of `v`, each little-endian.
template <typename T>
void PutLeAll(std::string* out, const std::vector<T>& v) {
  out->reserve(out->size() + v.size() * sizeof(T));
  for (const T& x : v) PutLe(out, x);
}

// The named widths, as the formats' documentation spells their fields.
inline void EncodeFixed16(void* dst, uint16_t v) { EncodeLe(dst, v); }
inline void EncodeFixed32(void* dst, uint32_t v) { EncodeLe(dst, v); }
inline void EncodeFixed64(void* dst, uint64_t v) { EncodeLe(dst, v); }
inline uint16_t DecodeFixed16(const void* p) { return GetLe<uint16_t>(p); }
inline uint32_t DecodeFixed32(const void* p) { return GetLe<uint32_t>(p); }
inline uint64_t DecodeFixed64(const void* p) { return GetLe<uint64_t>(p); }
inline void PutFixed16(std::string* out, uint16_t v) { PutLe(out, v); }
inline void PutFixed32(std::string* out, uint32_t v) { PutLe(out, v); }
inline void PutFixed64(std::string* out, uint64_t v) { PutLe(out, v); }

// A 32-bit little-endian length, then the bytes. The caller keeps `v` under 4 GiB.
inline void PutLengthPrefixed(std::string* out, std::string_view v) {
  PutFixed32(out, static_cast<uint32_t>(v.size()));
  out->append(v);
}

// Big-endian, for the formats that say so: JPEG marker fields, and LMDB keys that must sort in
// index order under memcmp.
inline uint16_t DecodeBigEndian16(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  return static_cast<uint16_t>(b[0] << 8 | b[1]);
}
inline uint32_t DecodeBigEndian32(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3];
}
inline uint64_t DecodeBigEndian64(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | b[i];
  return v;
}
inline void EncodeBigEndian64(void* dst, uint64_t v) {
  auto* b = static_cast<uint8_t*>(dst);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * (7 - i)));
}

// Reads little-endian values from the front of a byte string it does not own (`in` outlives
// the reader). A read past the end returns false and reads nothing, so a parser of untrusted
// bytes fails instead of overrunning.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  ByteReader(const void* data, size_t size) : in_(static_cast<const char*>(data), size) {}

  template <typename T>
  bool Le(T* v) {
    if (in_.size() < sizeof(T)) return false;
    *v = GetLe<T>(in_.data());
    in_.remove_prefix(sizeof(T));
    return true;
  }
  // n values; the length is checked before `v` is resized (bound n before calling).
  template <typename T>
  bool LeAll(size_t n, std::vector<T>* v) {
    if (in_.size() / sizeof(T) < n) return false;
    v->resize(n);
    for (size_t i = 0; i < n; ++i) (*v)[i] = GetLe<T>(in_.data() + i * sizeof(T));
    in_.remove_prefix(n * sizeof(T));
    return true;
  }
  // What PutLengthPrefixed wrote.
  bool LengthPrefixed(std::string* v) {
    uint32_t n = 0;
    if (in_.size() < 4 || in_.size() - 4 < DecodeFixed32(in_.data())) return false;
    Le(&n);
    v->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  size_t left() const { return in_.size(); }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

}  // namespace ddpio

#endif  // DDPIO_COMMON_CODING_H_
