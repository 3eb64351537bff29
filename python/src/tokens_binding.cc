// ddpio._ddpio.TokenSequences: a token dataset packed into fixed-length sequences
// (loader/token_packing.h), for ddpio.Loader(..., seq_len=S) (python/ddpio/tokens.py). Batches
// are filled into the caller's numpy arrays (which torch.from_numpy then shares) without the GIL.
// Not shared across fork: a forked child opens its own.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "ddpio/loader/token_packing.h"
#include "ddpio/storage/dataset_reader.h"
#include "status.h"

namespace ddpio::python {

namespace py = pybind11;

namespace {

class TokenSequences {
 public:
  TokenSequences(const std::string& path, uint64_t seq_len, uint64_t seed, bool shuffle)
      : seq_len_(seq_len), seed_(seed), shuffle_(shuffle) {
    absl::StatusOr<std::unique_ptr<storage::DatasetReader>> opened =
        absl::UnknownError("not opened");
    {
      py::gil_scoped_release release;
      opened = storage::DatasetReader::Open(path);
    }
    reader_ = ValueOrThrow(std::move(opened));
    if (!storage::IsTokenDataset(reader_->header())) {
      throw py::value_error(path +
                            " is an image dataset: seq_len packs a token dataset's "
                            "documents (convert one with source='jsonl', 'megatron' or "
                            "'tokens')");
    }
    absl::StatusOr<std::vector<uint32_t>> lengths;
    {
      py::gil_scoped_release release;
      lengths = storage::DocumentLengths(*reader_);
    }
    lengths_ = std::make_shared<const std::vector<uint32_t>>(ValueOrThrow(std::move(lengths)));
    SetEpoch(0);
  }

  void SetEpoch(uint64_t epoch) {
    plan_ = std::make_unique<loader::TokenPacking>(
        ValueOrThrow(loader::TokenPacking::Make(lengths_, seq_len_, seed_, epoch, shuffle_)));
    filler_ = std::make_unique<loader::TokenBatchFiller>(reader_.get(), plan_.get());
  }

  uint64_t size() const { return plan_->size(); }
  uint64_t tokens() const { return plan_->tokens(); }
  uint64_t documents() const { return lengths_->size(); }

  // Rows of `indices` into the arrays; returns (cu_seqlens entries written, max_seqlen).
  py::tuple Fill(py::array_t<uint64_t, py::array::c_style> indices,
                 py::array_t<bool, py::array::c_style> valid,
                 py::array_t<int64_t, py::array::c_style> tokens,
                 py::array_t<int64_t, py::array::c_style> labels,
                 py::array_t<int64_t, py::array::c_style> position_ids,
                 py::array_t<int64_t, py::array::c_style> document_ids,
                 py::array_t<float, py::array::c_style> loss_mask,
                 py::array_t<int32_t, py::array::c_style> cu_seqlens) {
    loader::TokenBatchView view{
        absl::MakeSpan(tokens.mutable_data(), static_cast<size_t>(tokens.size())),
        absl::MakeSpan(labels.mutable_data(), static_cast<size_t>(labels.size())),
        absl::MakeSpan(position_ids.mutable_data(), static_cast<size_t>(position_ids.size())),
        absl::MakeSpan(document_ids.mutable_data(), static_cast<size_t>(document_ids.size())),
        absl::MakeSpan(loss_mask.mutable_data(), static_cast<size_t>(loss_mask.size())),
        absl::MakeSpan(cu_seqlens.mutable_data(), static_cast<size_t>(cu_seqlens.size()))};
    absl::Status filled;
    {
      py::gil_scoped_release release;
      filled = filler_->Fill(
          absl::MakeConstSpan(indices.data(), static_cast<size_t>(indices.size())),
          absl::MakeConstSpan(valid.data(), static_cast<size_t>(valid.size())), &view);
    }
    ThrowIfError(filled);
    return py::make_tuple(view.cu_count, view.max_seqlen);
  }

 private:
  const uint64_t seq_len_, seed_;
  const bool shuffle_;
  std::unique_ptr<storage::DatasetReader> reader_;
  std::shared_ptr<const std::vector<uint32_t>> lengths_;
  std::unique_ptr<loader::TokenPacking> plan_;
  std::unique_ptr<loader::TokenBatchFiller> filler_;
};

}  // namespace

void BindTokens(py::module_& m) {
  py::class_<TokenSequences>(m, "TokenSequences",
                             "A token dataset packed into sequences of seq_len (+1) ids.")
      .def(py::init<const std::string&, uint64_t, uint64_t, bool>(), py::arg("path"),
           py::arg("seq_len"), py::arg("seed"), py::arg("shuffle"))
      .def("set_epoch", &TokenSequences::SetEpoch, py::arg("epoch"))
      .def("__len__", &TokenSequences::size)
      .def_property_readonly("tokens", &TokenSequences::tokens)
      .def_property_readonly("documents", &TokenSequences::documents)
      .def("fill", &TokenSequences::Fill);
}

}  // namespace ddpio::python
