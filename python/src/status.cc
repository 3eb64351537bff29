#include "status.h"

#include <pybind11/pybind11.h>

namespace ddpio::python {

namespace py = pybind11;

void ThrowStatus(const absl::Status& status) {
  // The message may hold bytes that are not UTF-8 (a path is bytes on Linux): kept, escaped.
  py::object message = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(status.message().data(),
                           static_cast<Py_ssize_t>(status.message().size()), "backslashreplace"));
  py::object type;
  try {
    type =
        py::module_::import("ddpio.errors").attr("error_for_code")(static_cast<int>(status.code()));
  } catch (const py::error_already_set&) {
    type = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);  // never lose the core's message
  }
  PyErr_SetObject(type.ptr(), message.ptr());
  throw py::error_already_set();
}

}  // namespace ddpio::python
