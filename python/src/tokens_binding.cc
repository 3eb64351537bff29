// ddpio._ddpio.TokenSequences: token datasets packed into fixed-length sequences and mixed by
// weight (loader/token_packing.h, token_mixture.h), for ddpio.Loader(..., seq_len=S)
// (python/ddpio/tokens.py). Batches are filled into the caller's numpy arrays (which
// torch.from_numpy then shares) without the GIL. Not shared across fork: a forked child opens its
// own.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bindings.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/token_mixture.h"
#include "ddpio/storage/dataset_reader.h"
#include "status.h"

namespace ddpio::python {

namespace py = pybind11;

namespace {

class TokenSequences {
 public:
  TokenSequences(const std::vector<std::string>& paths, const std::vector<double>& weights,
                 uint64_t seq_len, uint64_t seed, bool shuffle, uint64_t sequences_per_epoch) {
    if (paths.size() != weights.size()) {
      throw py::value_error(std::to_string(paths.size()) + " datasets but " +
                            std::to_string(weights.size()) + " weights");
    }
    absl::StatusOr<std::unique_ptr<loader::TokenMixture>> made = absl::UnknownError("not made");
    {
      py::gil_scoped_release release;
      made = Open(paths, weights, seq_len, seed, shuffle, sequences_per_epoch);
    }
    mixture_ = ValueOrThrow(std::move(made));
  }

  loader::TokenMixture& mixture() { return *mixture_; }

  // Rows of `positions` of `epoch` into the arrays; returns (cu_seqlens entries written,
  // max_seqlen). One fill at a time (iterators of one loader share the mixture's scratch).
  py::tuple Fill(uint64_t epoch, py::array_t<uint64_t, py::array::c_style> positions,
                 py::array_t<bool, py::array::c_style> valid,
                 py::array_t<int64_t, py::array::c_style> tokens,
                 py::array_t<int64_t, py::array::c_style> labels,
                 py::array_t<int64_t, py::array::c_style> position_ids,
                 py::array_t<int64_t, py::array::c_style> document_ids,
                 py::array_t<float, py::array::c_style> loss_mask,
                 py::array_t<int32_t, py::array::c_style> cu_seqlens,
                 py::array_t<int64_t, py::array::c_style> source) {
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
      std::lock_guard<std::mutex> lock(mu_);
      filled = mixture_->Fill(
          epoch, absl::MakeConstSpan(positions.data(), static_cast<size_t>(positions.size())),
          absl::MakeConstSpan(valid.data(), static_cast<size_t>(valid.size())), &view,
          absl::MakeSpan(source.mutable_data(), static_cast<size_t>(source.size())));
    }
    ThrowIfError(filled);
    return py::make_tuple(view.cu_count, view.max_seqlen);
  }

 private:
  static absl::StatusOr<std::unique_ptr<loader::TokenMixture>> Open(
      const std::vector<std::string>& paths, const std::vector<double>& weights, uint64_t seq_len,
      uint64_t seed, bool shuffle, uint64_t sequences_per_epoch) {
    std::vector<loader::TokenMixture::Source> sources;
    for (size_t d = 0; d < paths.size(); ++d) {
      // Checksums are checked by the filler, once for each document it reads lately rather than
      // once for every sequence that touches it.
      storage::ReaderOptions options;
      options.verify_checksums = false;
      DDPIO_ASSIGN_OR_RETURN(auto reader, storage::DatasetReader::Open(paths[d], options));
      if (!storage::IsTokenDataset(reader->header())) {
        return absl::InvalidArgumentError(
            paths[d] +
            " is an image dataset: seq_len packs a token dataset's documents (convert "
            "one with source='jsonl', 'megatron' or 'tokens')");
      }
      sources.push_back({std::move(reader), weights[d]});
    }
    return loader::TokenMixture::Make(std::move(sources), seq_len, seed, shuffle,
                                      sequences_per_epoch);
  }

  std::mutex mu_;
  std::unique_ptr<loader::TokenMixture> mixture_;
};

}  // namespace

void BindTokens(py::module_& m) {
  py::class_<TokenSequences>(
      m, "TokenSequences",
      "Token datasets packed into sequences of seq_len (+1) ids and mixed by weight.")
      .def(py::init<const std::vector<std::string>&, const std::vector<double>&, uint64_t, uint64_t,
                    bool, uint64_t>(),
           py::arg("paths"), py::arg("weights"), py::arg("seq_len"), py::arg("seed"),
           py::arg("shuffle"), py::arg("sequences_per_epoch") = 0)
      .def("__len__", [](TokenSequences& t) { return t.mixture().size(); })
      .def_property_readonly("sources", [](TokenSequences& t) { return t.mixture().sources(); })
      .def("source_tokens",
           [](TokenSequences& t, size_t d) { return t.mixture().source_tokens(d); })
      .def("source_documents",
           [](TokenSequences& t, size_t d) { return t.mixture().source_documents(d); })
      .def("source_sequences",
           [](TokenSequences& t, size_t d) { return t.mixture().source_sequences(d); })
      .def("source_identity",
           [](TokenSequences& t, size_t d) {
             const storage::DatasetReader& r = t.mixture().source_reader(d);
             return storage::DatasetIdentity(r.header(), r.completion());
           })
      .def("fill", &TokenSequences::Fill);
}

}  // namespace ddpio::python
