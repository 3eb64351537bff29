// Raising an absl::Status as the Python exception of its code (ddpio/errors.py): a NotFound is
// a FileNotFoundError, an InvalidArgument a ValueError, a DataLoss a ddpio.DataLossError, ...;
// every one is also a ddpio.Error and carries the Status message unchanged.
#ifndef DDPIO_PYTHON_SRC_STATUS_H_
#define DDPIO_PYTHON_SRC_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ddpio::python {

// Throws pybind11::error_already_set carrying the status. Must hold the GIL. `status` is not OK.
[[noreturn]] void ThrowStatus(const absl::Status& status);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) ThrowStatus(value.status());
  return *std::move(value);
}

}  // namespace ddpio::python

#endif  // DDPIO_PYTHON_SRC_STATUS_H_
