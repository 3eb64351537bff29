// Reading numbers from JSON that came from a file: nlohmann's get<uint64_t>() on a float or a
// negative number is a silent cast (undefined behaviour for out-of-range values, found by the
// dataset_meta fuzz target). These accept only what the field can hold. Private to storage/.
#ifndef DDPIO_STORAGE_INTERNAL_JSON_FIELDS_H_
#define DDPIO_STORAGE_INTERNAL_JSON_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>

namespace ddpio::storage::internal {

// False when `j` is not an object or `key` is absent, not an integer or outside [0, 2^64).
inline bool GetU64(const nlohmann::json& j, const char* key, uint64_t* out) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return false;
  *out = it->get<uint64_t>();
  return true;
}

// False when absent, not an integer or outside int's range.
inline bool GetInt(const nlohmann::json& j, const char* key, int* out) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return false;
  const int64_t v = it->get<int64_t>();
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT32_MAX))
    return false;
  if (v < INT32_MIN || v > INT32_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace ddpio::storage::internal

#endif  // DDPIO_STORAGE_INTERNAL_JSON_FIELDS_H_
