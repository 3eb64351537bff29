#include "python_store.h"

#include <pybind11/stl.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpio::python {

namespace py = pybind11;

namespace {

bool PythonRunning() { return Py_IsInitialized() != 0 && _Py_IsFinalizing() == 0; }

py::object Timedelta(std::chrono::milliseconds timeout) {
  return py::module_::import("datetime")
      .attr("timedelta")(py::arg("milliseconds") = timeout.count());
}

}  // namespace

PythonStore::PythonStore(py::object store, std::string name)
    : store_(std::move(store)), name_(std::move(name)) {}

PythonStore::~PythonStore() {
  if (!PythonRunning()) {
    store_.release();  // no interpreter to give it back to: leak the reference
    return;
  }
  py::gil_scoped_acquire gil;
  store_ = py::object();
}

template <typename F>
absl::Status PythonStore::Call(const std::string& what, F&& f) {
  if (!PythonRunning()) {
    return absl::UnavailableError(
        absl::StrCat(name_, ": ", what, ": the Python interpreter is shutting down"));
  }
  py::gil_scoped_acquire gil;
  try {
    f();
    return absl::OkStatus();
  } catch (py::error_already_set& e) {
    const std::string message = e.what();
    // torch's stores say "Timeout", "Socket Timeout" or "Wait timeout" when a wait runs out.
    const std::string lower = absl::AsciiStrToLower(message);
    const bool timeout =
        absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out");
    const std::string text = absl::StrCat(name_, ": ", what, ": ", message);
    return timeout ? absl::DeadlineExceededError(text) : absl::UnavailableError(text);
  } catch (const std::exception& e) {  // a pybind11 cast of an unexpected reply
    return absl::UnavailableError(absl::StrCat(name_, ": ", what, ": ", e.what()));
  }
}

absl::Status PythonStore::Set(const std::string& key, const std::string& value) {
  return Call(absl::StrCat("set ", key), [&] { store_.attr("set")(key, py::bytes(value)); });
}

absl::StatusOr<std::string> PythonStore::Get(const std::string& key,
                                             std::chrono::milliseconds timeout) {
  std::string value;
  absl::Status st = Wait({key}, timeout);
  if (!st.ok()) return st;
  st =
      Call(absl::StrCat("get ", key), [&] { value = store_.attr("get")(key).cast<std::string>(); });
  if (!st.ok()) return st;
  return value;
}

absl::Status PythonStore::Wait(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  return Call(absl::StrCat("wait for ", absl::StrJoin(keys, ", "), " (", timeout.count(), " ms)"),
              [&] { store_.attr("wait")(py::cast(keys), Timedelta(timeout)); });
}

absl::StatusOr<int64_t> PythonStore::Add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  absl::Status st = Call(absl::StrCat("add to ", key),
                         [&] { value = store_.attr("add")(key, delta).cast<int64_t>(); });
  if (!st.ok()) return st;
  return value;
}

absl::StatusOr<bool> PythonStore::Check(const std::vector<std::string>& keys) {
  bool all = false;
  absl::Status st = Call(absl::StrCat("check ", absl::StrJoin(keys, ", ")),
                         [&] { all = store_.attr("check")(py::cast(keys)).cast<bool>(); });
  if (!st.ok()) return st;
  return all;
}

}  // namespace ddpio::python
