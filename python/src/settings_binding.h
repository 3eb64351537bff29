// The pipeline's settings table (ddpio/pipeline/settings.h) in Python's terms: a dict of
// ddpio.Loader's options becomes PipelineOptions setting by setting, through the library's own
// types, ranges and messages, and the table itself is readable from Python
// (_ddpio.pipeline_settings()). Must hold the GIL.
#ifndef DDPIO_PYTHON_SRC_SETTINGS_BINDING_H_
#define DDPIO_PYTHON_SRC_SETTINGS_BINDING_H_

#include <pybind11/pybind11.h>

#include <string>

#include "ddpio/pipeline/pipeline_options.h"

namespace ddpio::python {

// ddpio.Loader's keyword for a library setting, where the two differ ("workers" ->
// "num_workers"); else the setting's own name.
std::string LoaderKeyword(const std::string& setting);

// Takes every key of `options` that names a setting out of the dict and sets it in *out: None
// leaves an optional store setting to the environment; a value of the wrong type or out of range
// is a ValueError "<name> must be <what>, got <value>" (with the Loader's keyword in front where
// it differs). Keys that name no setting stay in the dict.
void TakeSettings(pybind11::dict& options, PipelineOptions* out);

// {name: default} for every setting (None: an optional setting not set).
pybind11::dict SettingDefaults();
// [{name, type, default, min, max, choices, optional, help}] for every setting, in the table's
// order.
pybind11::list SettingTable();

}  // namespace ddpio::python

#endif  // DDPIO_PYTHON_SRC_SETTINGS_BINDING_H_
