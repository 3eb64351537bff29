// ddpio._ddpio.convert: ddpio::convert::Convert for Python (ddpio.convert, docs/PYTHON.md). The
// settings' defaults are those of convert::ConvertOptions. The conversion runs without the GIL;
// the progress callable is called with it, on the calling thread, when the library reports (at
// most every 100 ms, and at the end). An exception raised by the callable — or a signal's, such
// as KeyboardInterrupt, checked at the same moments — stops the conversion, which leaves the
// dataset incomplete and resumable, and is raised again once the conversion has stopped.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bindings.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/convert/convert.h"
#include "status.h"
#include "text.h"

namespace ddpio::python {

namespace py = pybind11;

namespace {

// A path given as str, bytes or os.PathLike, as the file system sees it.
std::string FsPath(const py::handle& path) {
  py::object p = py::module_::import("os").attr("fsencode")(path);
  return p.cast<std::string>();
}

// Every string in it is decoded as text.h says, so a conversion to or from any path never ends in a
// UnicodeDecodeError after its work is done.
py::dict SummaryDict(const convert::ConvertSummary& s) {
  py::list skipped;
  for (const auto& f : s.skipped) {
    py::dict d;
    d["index"] = f.source_index;
    d["source"] = FsStr(f.relative);
    d["reason"] = MessageStr(f.reason);
    skipped.append(d);
  }
  py::dict stored_as;
  for (const auto& [how, records] : s.stored_as) stored_as[MessageStr(how)] = records;
  py::dict d;
  d["source"] = FsStr(s.source);
  d["out"] = FsStr(s.out);
  d["entries"] = s.entries;
  d["records"] = s.records;
  d["classes"] = s.classes;
  d["bytes"] = s.payload_bytes;
  d["tokens"] = s.token_dataset ? py::object(py::int_(s.tokens)) : py::object(py::none());
  d["source_bytes_read"] = s.source_bytes_read;
  d["skipped"] = skipped;
  d["stored_as"] = stored_as;
  d["resumed_from"] = s.resumed_from;
  d["already_complete"] = s.already_complete;
  d["seconds"] = s.seconds;
  return d;
}

// The library's error, with how to change the settings it names in ddpio.convert's terms (its
// words never name a flag: common/status_macros.h, WithSetting).
absl::Status Annotated(absl::Status status) {
  static constexpr std::pair<std::string_view, std::string_view> kKeywords[] = {
      {"resume", "resume=True"},
      {"resume_conversion", "resume=True"},
      {"skip_invalid", "skip_invalid=True"},
      {"shards", "shards"},
      {"synsets", "synsets"},
      {"val_labels", "val_labels"},
      {"max_decode_bytes", "max_decode_bytes"},
      {"tokenizer", "tokenizer"},
      {"eos_id", "eos"},
      {"dtype", "dtype"},
  };
  std::vector<std::string> hints;
  for (const std::string& setting : SettingsOf(status)) {
    for (const auto& [name, keyword] : kKeywords) {
      if (setting == name && std::find(hints.begin(), hints.end(), keyword) == hints.end())
        hints.emplace_back(keyword);
    }
  }
  if (hints.empty()) return status;
  absl::Status out(status.code(), absl::StrCat(status.message(), " (see ddpio.convert's ",
                                               absl::StrJoin(hints, ", "), ")"));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

py::dict Convert(const py::object& src, const py::object& out,
                 const std::optional<std::string>& source, int shards, int threads, bool resume,
                 bool skip_invalid, bool full_decode, int max_side, int quality,
                 int restart_interval, uint64_t max_decode_bytes, bool single_file,
                 uint64_t batch_records, const py::object& list_root, const py::object& val_labels,
                 const py::object& synsets, const py::object& tokenizer,
                 const std::string& text_field, std::optional<int64_t> eos,
                 const std::optional<std::string>& dtype, const py::object& progress) {
  convert::ConvertOptions o;
  o.source = FsPath(src);
  if (!out.is_none()) o.out = FsPath(out);
  if (source.has_value()) o.source_kind = ValueOrThrow(convert::ParseSourceKind(*source));
  if (!list_root.is_none()) o.list_root = FsPath(list_root);
  if (!val_labels.is_none()) o.val_labels = FsPath(val_labels);
  if (!synsets.is_none()) o.synsets = FsPath(synsets);
  if (!tokenizer.is_none()) o.tokens.tokenizer = FsPath(tokenizer);
  o.tokens.text_field = text_field;
  if (eos.has_value()) o.tokens.eos_id = *eos < 0 ? -1 : *eos;
  if (dtype.has_value()) o.tokens.dtype = *dtype;
  o.shards = shards;
  o.threads = threads;
  o.resume = resume;
  o.skip_invalid = skip_invalid;
  o.full_decode = full_decode;
  o.shrink.max_side = max_side;
  o.shrink.quality = quality;
  o.restart_interval = restart_interval;
  o.max_decode_bytes = max_decode_bytes;
  o.writer.single_file = single_file;
  o.writer.batch_records = batch_records;
  if (!progress.is_none() && !PyCallable_Check(progress.ptr())) {
    throw py::type_error("progress must be a callable taking a ddpio.ConvertProgress, or None");
  }
  std::optional<py::error_already_set> raised;  // what the callable (or a signal) raised
  const convert::ProgressCallback callback = [&](const convert::ConvertProgress& p) {
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (progress.is_none()) return true;
      py::object answer = progress(p);
      return !(answer.is(py::bool_(false)));
    } catch (py::error_already_set& e) {
      raised.emplace(std::move(e));
      return false;
    }
  };
  absl::StatusOr<convert::ConvertSummary> summary;
  {
    py::gil_scoped_release release;
    summary = convert::Convert(o, callback);
  }
  if (raised.has_value()) throw *raised;
  if (!summary.ok()) ThrowStatus(Annotated(summary.status()));
  return SummaryDict(*std::move(summary));
}

}  // namespace

void BindConvert(py::module_& m) {
  py::class_<convert::ConvertProgress>(
      m, "ConvertProgress", "How far a ddpio.convert has come: counts of source entries.")
      .def_readonly(
          "entries_done", &convert::ConvertProgress::entries_done,
          "Source entries done (stored or skipped), counting those a resumed conversion found done")
      .def_readonly("entries_total", &convert::ConvertProgress::entries_total,
                    "Source entries in all (0: unknown)")
      .def_readonly("records", &convert::ConvertProgress::records, "Entries stored")
      .def_readonly("skipped", &convert::ConvertProgress::skipped, "Entries skipped (skip_invalid)")
      .def_readonly("source_bytes_read", &convert::ConvertProgress::source_bytes_read,
                    "Bytes read from the source in this run")
      .def_readonly("final", &convert::ConvertProgress::final,
                    "True on the last call: the dataset is complete")
      .def("__repr__", [](const convert::ConvertProgress& p) {
        return "ConvertProgress(entries_done=" + std::to_string(p.entries_done) +
               ", entries_total=" + std::to_string(p.entries_total) +
               ", records=" + std::to_string(p.records) + ", skipped=" + std::to_string(p.skipped) +
               ", source_bytes_read=" + std::to_string(p.source_bytes_read) +
               ", final=" + (p.final ? "True" : "False") + ")";
      });
  const convert::ConvertOptions d;
  m.def(
      "convert", &Convert, py::arg("src"), py::arg("out") = py::none(), py::kw_only(),
      py::arg("source") = py::none(), py::arg("shards") = d.shards, py::arg("threads") = d.threads,
      py::arg("resume") = d.resume, py::arg("skip_invalid") = d.skip_invalid,
      py::arg("full_decode") = d.full_decode, py::arg("max_side") = d.shrink.max_side,
      py::arg("quality") = d.shrink.quality, py::arg("restart_interval") = d.restart_interval,
      py::arg("max_decode_bytes") = d.max_decode_bytes,
      py::arg("single_file") = d.writer.single_file,
      py::arg("batch_records") = d.writer.batch_records, py::arg("list_root") = py::none(),
      py::arg("val_labels") = py::none(), py::arg("synsets") = py::none(),
      py::arg("tokenizer") = py::none(), py::arg("text_field") = d.tokens.text_field,
      py::arg("eos") = py::none(), py::arg("dtype") = py::none(), py::arg("progress") = py::none(),
      R"(Converts `src` into the ddpio dataset `out`; returns a dict summing it up.

`source` says what `src` is: "imagefolder" (the default; with `val_labels`, a flat folder of
ImageNet validation images), "list" (a file of "relative/path label" lines, relative to
`list_root` or the file's folder), "caffe-lmdb" or "dataset" (a ddpio dataset, rewritten in
place when `out` is None). For a token dataset (language models; one record per document):
"jsonl" (JSON lines, a file or folder, each line's `text_field` tokenized with the SentencePiece
model `tokenizer`, then its EOS id), "megatron" (`src` is Megatron-LM's PREFIX of PREFIX.bin /
PREFIX.idx, one record per sequence) or "tokens" (a flat file of ids, raw with `dtype` "uint16"
or "uint32", or a .npy, split into documents after every `eos` id). `eos`: jsonl, the id
appended (default the model's; -1 none); tokens, where documents end (default none: documents
of 65536 ids); megatron, recorded. The summary's `tokens` counts the ids (None for images). `progress(p)`, if given, is called with a ddpio.ConvertProgress at
most 10 times a second and once at the end; returning False or raising stops the conversion,
leaving `out` incomplete: `resume=True` continues it. Errors are ddpio.Error subclasses
(ValueError for bad settings).)");
}

}  // namespace ddpio::python
