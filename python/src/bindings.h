// The pieces of the ddpio._ddpio extension module, one function per file.
#ifndef DDPIO_PYTHON_SRC_BINDINGS_H_
#define DDPIO_PYTHON_SRC_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace ddpio::python {

void BindSampler(pybind11::module_& m);
void BindDataset(pybind11::module_& m);
void BindComm(pybind11::module_& m);
void BindPipeline(pybind11::module_& m);
void BindLog(pybind11::module_& m);
void BindConvert(pybind11::module_& m);
void BindTokens(pybind11::module_& m);

}  // namespace ddpio::python

#endif  // DDPIO_PYTHON_SRC_BINDINGS_H_
