#include "settings_binding.h"

#include <pybind11/stl.h>

#include <cmath>
#include <limits>
#include <map>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/pipeline/settings.h"
#include "status.h"

namespace py = pybind11;

namespace ddpio::python {
namespace {

// Debian's Abseil has a string_view of its own.
std::string S(std::string_view v) { return std::string(v); }

const char* TypeName(SettingType type) {
  switch (type) {
    case SettingType::kBool:
      return "bool";
    case SettingType::kInt:
    case SettingType::kUnsigned:
      return "int";
    case SettingType::kNumber:
      return "float";
    case SettingType::kSeconds:
      return "seconds";
    case SettingType::kChoice:
      return "choice";
    case SettingType::kText:
      return "str";
    case SettingType::kTriple:
      return "triple";
  }
  return "";
}

// What a Python value of the wrong type is refused with: "<name> must be <what>, got <repr>".
absl::Status WrongType(const Setting& s, const char* what, const py::handle& v) {
  return WithSetting(absl::InvalidArgumentError(absl::StrCat(S(s.name), " must be ", what, ", got ",
                                                             py::repr(v).cast<std::string>())),
                     s.name);
}

bool IsNumber(const py::handle& v) {
  return !py::isinstance<py::bool_>(v) &&
         (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v));
}

// `v` as the setting's type; only the type is checked here, the range is the table's.
absl::StatusOr<SettingValue> FromPython(const Setting& s, const py::handle& v) {
  if (v.is_none()) return std::monostate{};
  switch (s.type) {
    case SettingType::kBool:
      if (!py::isinstance<py::bool_>(v)) return WrongType(s, "True or False", v);
      return v.cast<bool>();
    case SettingType::kInt:
    case SettingType::kUnsigned: {
      if (py::isinstance<py::bool_>(v) || !py::isinstance<py::int_>(v)) {
        return WrongType(s, "an integer", v);
      }
      if (v < py::int_(0)) {
        if (v < py::int_(std::numeric_limits<int64_t>::min())) return WrongType(s, "an integer", v);
        return v.cast<int64_t>();
      }
      if (v > py::int_(std::numeric_limits<uint64_t>::max())) return WrongType(s, "an integer", v);
      return v.cast<uint64_t>();
    }
    case SettingType::kNumber:
    case SettingType::kSeconds:
      if (!IsNumber(v)) return WrongType(s, "a number", v);
      return v.cast<double>();
    case SettingType::kChoice:
    case SettingType::kText:
      if (!py::isinstance<py::str>(v)) return WrongType(s, "a str", v);
      return v.cast<std::string>();
    case SettingType::kTriple: {
      if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v) || py::len(v) != 3) {
        return WrongType(s, "three numbers (one per channel)", v);
      }
      std::array<double, 3> a{};
      for (int i = 0; i < 3; ++i) {
        py::object x = v[py::int_(i)];
        if (!IsNumber(x)) return WrongType(s, "three numbers (one per channel)", v);
        a[i] = x.cast<double>();
      }
      return a;
    }
  }
  return WrongType(s, "a value", v);
}

py::object ToPython(const SettingValue& value) {
  return std::visit(
      [](const auto& v) -> py::object {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) {
          return py::none();
        } else if constexpr (std::is_same_v<V, std::array<double, 3>>) {
          return py::make_tuple(v[0], v[1], v[2]);
        } else {
          return py::cast(v);
        }
      },
      value);
}

}  // namespace

std::string LoaderKeyword(const std::string& setting) {
  static const auto* names = new std::map<std::string, std::string>{
      {"workers", "num_workers"},
      {"stddev", "normalize"},
      {"mean", "normalize"},
      {"image_height", "image_size"},
      {"scale_min", "RandomResizedCrop scale"},
      {"scale_max", "RandomResizedCrop scale"},
      {"ratio_min", "RandomResizedCrop ratio"},
      {"ratio_max", "RandomResizedCrop ratio"},
      {"flip_probability", "RandomHorizontalFlip p"},
      {"held_batches", "held_memory"},
  };
  auto it = names->find(setting);
  return it == names->end() ? setting : it->second;
}

void TakeSettings(py::dict& options, PipelineOptions* out) {
  for (const Setting& s : PipelineSettings()) {
    const py::str key(S(s.name));
    if (!options.contains(key)) continue;
    py::object v = options[key];
    const std::string keyword = LoaderKeyword(S(s.name));
    absl::StatusOr<SettingValue> value = FromPython(s, v);
    const absl::Status st =
        value.ok() ? SetSetting(out, s.name, *std::move(value)) : value.status();
    if (!st.ok()) ThrowStatus(keyword == S(s.name) ? st : Annotate(st, keyword));
    options.attr("pop")(key);
  }
}

py::dict SettingDefaults() {
  const PipelineOptions defaults;
  py::dict d;
  for (const Setting& s : PipelineSettings()) d[py::str(S(s.name))] = ToPython(s.get(defaults));
  return d;
}

py::list SettingTable() {
  const PipelineOptions defaults;
  py::list table;
  for (const Setting& s : PipelineSettings()) {
    py::dict row;
    row["name"] = S(s.name);
    row["type"] = TypeName(s.type);
    row["default"] = ToPython(s.get(defaults));
    const bool numeric = s.type != SettingType::kBool && s.type != SettingType::kChoice &&
                         s.type != SettingType::kText;
    row["min"] = numeric ? py::object(py::float_(s.min)) : py::object(py::none());
    row["max"] = numeric ? py::object(py::float_(s.max)) : py::object(py::none());
    row["min_open"] = s.min_open;
    py::list choices;
    for (std::string_view c : s.choices) choices.append(S(c));
    row["choices"] = choices;
    row["optional"] = s.optional;
    row["range"] = SettingRange(s);
    row["help"] = S(s.help);
    table.append(row);
  }
  return table;
}

}  // namespace ddpio::python
