// ddpio._ddpio.Dataset: random access to a converted dataset's records, for ddpio.Dataset
// (python/ddpio/dataset.py). Safe under fork (torch DataLoader workers): LMDB forbids using an
// environment opened before fork, so a process that finds itself a child of the one that opened
// the dataset opens it again and never touches the inherited environment.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "bindings.h"
#include "ddpio/storage/dataset_reader.h"
#include "interruptible.h"
#include "status.h"
#include "text.h"

namespace ddpio::python {

namespace py = pybind11;

namespace {

class Dataset {
 public:
  explicit Dataset(std::string path) : path_(std::move(path)) { Reopen(); }
  ~Dataset() {
    // An environment inherited over fork must not be closed here (mdb_env_close would act on
    // the parent's state): it is left to the process's exit.
    if (pid_ != getpid()) (void)reader_.release();
  }
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const storage::DatasetReader& reader() {
    if (pid_ != getpid()) {
      (void)reader_.release();
      Reopen();
    }
    return *reader_;
  }

  // Record `index`, read without the GIL.
  storage::Record Read(int64_t index) {
    const storage::DatasetReader& r = reader();
    if (index < 0 || static_cast<uint64_t>(index) >= r.size()) {
      throw py::index_error("index " + std::to_string(index) + " is outside the dataset's " +
                            std::to_string(r.size()) + " records (" + path_ + ")");
    }
    absl::StatusOr<storage::Record> record;
    {
      py::gil_scoped_release release;
      record = r.ReadCopy(static_cast<uint64_t>(index));
    }
    return ValueOrThrow(std::move(record));
  }

  py::tuple Get(int64_t index) {
    storage::Record rec = Read(index);
    const int width = reader().header().tokens.width;
    if (storage::TokenWidth(rec.type) != width) {
      ThrowStatus(absl::DataLossError(
          "record " + std::to_string(index) + " of " + path_ + " is a " +
          storage::ContentTypeName(rec.type) + " record in " +
          (width == 0 ? std::string("an image dataset")
                      : "a token dataset of " + std::to_string(8 * width) + "-bit ids")));
    }
    if (width != 0) {  // a document: its ids' bytes and their width
      return py::make_tuple(
          py::bytes(reinterpret_cast<const char*>(rec.payload.data()), rec.payload.size()),
          storage::TokenWidth(rec.type));
    }
    std::string file = ValueOrThrow(storage::ImageFileBytes(rec.view()));
    return py::make_tuple(py::bytes(file), rec.label);
  }

  py::str Source(int64_t index) { return FsStr(Read(index).source_name); }

  py::dict Info() {
    const storage::DatasetReader& r = reader();
    py::dict d;
    d["path"] = FsStr(r.path());
    d["size"] = r.size();
    d["classes"] = r.header().classes.size();
    d["payload_bytes"] = r.completion().payload_bytes;
    d["skipped"] = r.completion().skipped;
    d["file_bytes"] = r.file_bytes();
    d["format_version"] = r.header().format_version;
    d["source_kind"] = r.header().source_kind;
    d["source_path"] = FsStr(r.header().source_path);
    d["tool_version"] = r.header().tool_version;
    if (storage::IsTokenDataset(r.header())) {
      const storage::TokenInfo& t = r.header().tokens;
      d["documents"] = r.size();
      d["tokens"] = r.completion().payload_bytes / static_cast<uint64_t>(t.width);
      d["dtype"] = t.width == 2 ? "uint16" : "uint32";
      d["vocab_size"] = t.vocab_size;
      d["eos_id"] = t.eos_id;
      d["tokenizer"] = FsStr(t.tokenizer);
    }
    return d;
  }

 private:
  void Reopen() {
    // From a failing object store this rides out the outage: Ctrl-C gives it up.
    auto cancel = std::make_shared<std::atomic<bool>>(false);  // (the reader's client keeps it)
    storage::ReaderOptions options;
    options.cancel = cancel;
    absl::StatusOr<std::unique_ptr<storage::DatasetReader>> opened =
        absl::UnknownError("not opened");
    RunInterruptibly([&] { opened = storage::DatasetReader::Open(path_, options); }, *cancel);
    reader_ = ValueOrThrow(std::move(opened));
    pid_ = getpid();
  }

  std::string path_;
  pid_t pid_ = 0;
  std::unique_ptr<storage::DatasetReader> reader_;
};

}  // namespace

void BindDataset(py::module_& m) {
  py::class_<Dataset>(m, "Dataset", "A converted dataset's records (see ddpio.Dataset).")
      .def(py::init<std::string>(), py::arg("path"))
      .def("__len__", [](Dataset& d) { return d.reader().size(); })
      .def("get", &Dataset::Get, py::arg("index"), "(image file bytes, label) of record `index`")
      .def("source", &Dataset::Source, py::arg("index"), "the source file name of record `index`")
      .def_property_readonly("classes",
                             [](Dataset& d) {
                               py::list names;
                               for (const std::string& c : d.reader().header().classes)
                                 names.append(FsStr(c));
                               return names;
                             })
      .def("info", &Dataset::Info)
      .def_property_readonly("token_width", [](Dataset& d) {
        return d.reader().header().tokens.width;  // 0: images
      });
}

}  // namespace ddpio::python
