// Strings from the C++ core as Python str. Names from the file system are bytes on Linux, not
// always UTF-8: they come back as Python gives file names (surrogateescape), so os.fsencode
// turns them into their exact bytes; messages that may quote such a name come back readable,
// their bytes that are not UTF-8 escaped. Neither raises UnicodeDecodeError. Need the GIL.
#ifndef DDPIO_PYTHON_SRC_TEXT_H_
#define DDPIO_PYTHON_SRC_TEXT_H_

#include <pybind11/pybind11.h>

#include <string_view>

namespace ddpio::python {

inline pybind11::str FsStr(std::string_view name) {
  return pybind11::reinterpret_steal<pybind11::str>(
      PyUnicode_DecodeFSDefaultAndSize(name.data(), static_cast<Py_ssize_t>(name.size())));
}

inline pybind11::str MessageStr(std::string_view text) {
  return pybind11::reinterpret_steal<pybind11::str>(
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace"));
}

}  // namespace ddpio::python

#endif  // DDPIO_PYTHON_SRC_TEXT_H_
