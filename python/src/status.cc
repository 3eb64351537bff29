#include "status.h"

#include <pybind11/pybind11.h>

#include <string>

namespace ddpio::python {

namespace py = pybind11;

void ThrowStatus(const absl::Status& status) {
  py::object type = py::module_::import("ddpio.errors").attr("error_for_code")(static_cast<int>(status.code()));
  const std::string message(status.message());
  PyErr_SetString(type.ptr(), message.c_str());
  throw py::error_already_set();
}

}  // namespace ddpio::python
