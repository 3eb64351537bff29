// PythonStore: a comm::Store over a Python object with torch.distributed's Store methods (set,
// get, wait, add, check) — how ddpio.Loader joins a job through the store of an initialised
// torch.distributed process group, whatever its init method (env://, tcp://, file://): the C++
// rendezvous then meets the other ranks exactly where torch met them.
//
// Every call takes the GIL for the duration of the Python call only (torch's store methods
// release it while they wait), so it may be called from any C++ thread that does not hold the
// GIL. Errors: a timeout reported by the store is DeadlineExceeded, any other Python exception
// Unavailable naming the store and the key; after the interpreter began finalising every call is
// Unavailable and the Python object is leaked rather than released. Thread-safe.
#ifndef DDPIO_PYTHON_SRC_PYTHON_STORE_H_
#define DDPIO_PYTHON_SRC_PYTHON_STORE_H_

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ddpio/comm/store.h"

namespace ddpio::python {

class PythonStore : public comm::Store {
 public:
  // `store`: a torch.distributed Store (or anything with its methods). Must hold the GIL.
  PythonStore(pybind11::object store, std::string name);
  ~PythonStore() override;
  PythonStore(const PythonStore&) = delete;
  PythonStore& operator=(const PythonStore&) = delete;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;

 private:
  // Runs f() (which calls into Python) holding the GIL; a Python exception becomes a Status.
  template <typename F>
  absl::Status Call(const std::string& what, F&& f);

  pybind11::object store_;  // touched only with the GIL held
  const std::string name_;
};

}  // namespace ddpio::python

#endif  // DDPIO_PYTHON_SRC_PYTHON_STORE_H_
