// Little-endian encoding of fixed-width integers and floats, for every format ddpio writes to
// disk or the wire (feed messages, checkpoints, the store protocol): the formats say
// little-endian, and these make the code say it too, whatever the host's order.
//
//   std::string out;  PutLe<uint64_t>(&out, 7);
//   ByteReader r(bytes);  uint64_t v;  if (!r.Le(&v)) { /* truncated */ }
#ifndef DDPIO_COMMON_BYTE_ORDER_H_
#define DDPIO_COMMON_BYTE_ORDER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ddpio {

namespace internal {
template <typename T>
using UintOf = std::conditional_t<sizeof(T) == 1, uint8_t,
                                  std::conditional_t<sizeof(T) == 2, uint16_t,
                                                     std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
}  // namespace internal

// Appends `v` (an integer or float of 1, 2, 4 or 8 bytes) in little-endian order.
template <typename T>
void PutLe(std::string* out, T v) {
  static_assert(std::is_arithmetic_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8));
  internal::UintOf<T> u;
  std::memcpy(&u, &v, sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

// Every element of `v`, each little-endian.
template <typename T>
void PutLeAll(std::string* out, const std::vector<T>& v) {
  out->reserve(out->size() + v.size() * sizeof(T));
  for (const T& x : v) PutLe(out, x);
}

// The little-endian T at `p` (sizeof(T) readable bytes).
template <typename T>
T GetLe(const void* p) {
  static_assert(std::is_arithmetic_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8));
  const auto* b = static_cast<const uint8_t*>(p);
  internal::UintOf<T> u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u |= static_cast<internal::UintOf<T>>(b[i]) << (8 * i);
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

// Reads little-endian values from the front of a byte string; a read past its end returns
// false and reads nothing.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
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
  size_t left() const { return in_.size(); }

 private:
  std::string_view in_;
};

}  // namespace ddpio

#endif  // DDPIO_COMMON_BYTE_ORDER_H_
