// ddpio._ddpio: the C++ side of the Python package. Users import `ddpio`, not this module.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "ddpio/version.h"

PYBIND11_MODULE(_ddpio, m) {
  m.doc() = "ddpio's C++ core; use the ddpio package.";
  m.attr("__version__") = DDPIO_VERSION;
  ddpio::python::BindSampler(m);
  ddpio::python::BindDataset(m);
  ddpio::python::BindComm(m);
  ddpio::python::BindPipeline(m);
  ddpio::python::BindLog(m);
  ddpio::python::BindConvert(m);
  ddpio::python::BindTokens(m);
}
