// ddpio._ddpio.make_plan / EpochPlan: the sampler's plan for one epoch, for
// ddpio.DistributedSampler (python/ddpio/sampler.py), which adds torch's constructor, set_epoch and
// resume state.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.h"
#include "ddpio/sampler/distributed_sampler.h"
#include "status.h"

namespace ddpio::python {

namespace py = pybind11;

namespace {

sampler::EpochPlan MakePlan(uint64_t size, int num_replicas, bool shuffle, uint64_t seed,
                            const std::string& padding, const std::string& permutation,
                            uint64_t epoch, uint64_t start) {
  sampler::SamplerOptions o;
  o.dataset_size = size;
  o.num_replicas = num_replicas;
  o.shuffle = shuffle;
  o.seed = seed;
  o.padding = ValueOrThrow(sampler::ParsePadding(padding));
  o.permutation = ValueOrThrow(sampler::ParsePermutationKind(permutation));
  auto s = ValueOrThrow(sampler::DistributedSampler::Create(o));
  absl::StatusOr<sampler::EpochPlan> plan;
  {
    py::gil_scoped_release release;  // a large permutation takes milliseconds
    plan = s.Plan(epoch, start);
  }
  return ValueOrThrow(std::move(plan));
}

void CheckRank(const sampler::EpochPlan& plan, int rank) {
  if (rank < 0 || rank >= plan.num_replicas()) {
    throw py::value_error("rank " + std::to_string(rank) + " is outside [0, " +
                          std::to_string(plan.num_replicas() - 1) + "]");
  }
}

// (indices: int64[k], padding: bool[k]) of `rank`'s stream.
py::tuple Stream(const sampler::EpochPlan& plan, int rank) {
  CheckRank(plan, rank);
  const uint64_t n = plan.NumSamples(rank);
  py::array_t<int64_t> indices(static_cast<py::ssize_t>(n));
  py::array_t<bool> padding(static_cast<py::ssize_t>(n));
  int64_t* out = indices.mutable_data();
  bool* pad = padding.mutable_data();
  {
    py::gil_scoped_release release;
    for (uint64_t j = 0; j < n; ++j) {
      out[j] = static_cast<int64_t>(plan.IndexAt(rank, j));
      pad[j] = plan.IsPadding(rank, j);
    }
  }
  return py::make_tuple(indices, padding);
}

}  // namespace

void BindSampler(py::module_& m) {
  py::class_<sampler::EpochPlan>(m, "EpochPlan", "One epoch's assignment of samples to ranks.")
      .def_property_readonly("epoch", &sampler::EpochPlan::epoch)
      .def_property_readonly("start", &sampler::EpochPlan::start)
      .def_property_readonly("num_replicas", &sampler::EpochPlan::num_replicas)
      .def("num_samples",
           [](const sampler::EpochPlan& p, int rank) {
             CheckRank(p, rank);
             return p.NumSamples(rank);
           })
      .def("num_steps", &sampler::EpochPlan::NumSteps)
      .def("consumed_after", &sampler::EpochPlan::ConsumedAfter, py::arg("steps"))
      .def(
          "indices",
          [](const sampler::EpochPlan& p, int rank, uint64_t begin, uint64_t count) {
            CheckRank(p, rank);
            const uint64_t n = p.NumSamples(rank);
            const uint64_t end = begin >= n ? begin : begin + std::min(count, n - begin);
            std::vector<uint64_t> out(end > begin ? end - begin : 0);
            for (uint64_t j = 0; j < out.size(); ++j) out[j] = p.IndexAt(rank, begin + j);
            return out;
          },
          py::arg("rank"), py::arg("begin") = 0, py::arg("count") = UINT64_MAX,
          "the rank's indices [begin, begin + count) in this plan, as a list (no numpy needed)")
      .def("stream", &Stream, py::arg("rank"),
           "(indices int64 array, padding bool array) of the rank's samples in this plan");
  m.def("make_plan", &MakePlan, py::arg("size"), py::arg("num_replicas"), py::arg("shuffle"),
        py::arg("seed"), py::arg("padding"), py::arg("permutation"), py::arg("epoch"),
        py::arg("start"), "The sampler's plan for (epoch, start): docs/SAMPLER.md.");
}

}  // namespace ddpio::python
