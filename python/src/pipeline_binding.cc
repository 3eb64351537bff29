// ddpio._ddpio.Pipeline: the C++ Pipeline (ddpio/pipeline/pipeline.h) for ddpio.Loader
// (python/ddpio/loader.py). Batches come out as numpy arrays viewing the pipeline's memory
// (Pipeline::NextHeld): each array's base owns the batch's hold, so the slot is not reused until
// the last array (and every torch tensor made from one) is gone.
//
// Every rank of a job joins it once: the first Pipeline of a process joins (through the store of
// torch.distributed's process group when one runs; else the rank from the environment: torchrun's
// agent store, Slurm, Open MPI, or alone) and later ones, which every rank must open in the same
// order, use the same job. The job is left when the last pipeline is gone
// and leave_job() was called (at interpreter exit, by ddpio/loader.py).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "bindings.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/cuda_runtime.h"
#include "ddpio/pipeline/pipeline.h"
#include "python_store.h"
#include "status.h"

namespace ddpio::python {

namespace py = pybind11;

namespace {

std::mutex job_mu;
std::shared_ptr<comm::Job> shared_job;  // guarded by job_mu
pid_t job_pid = 0;                      // the process that joined it; guarded by job_mu

// A process group torch.distributed runs (ddpio/loader.py finds it): ddpio joins through its
// store, whatever the init method (a TCPStore, a FileStore, ...), reached through Python.
struct TorchGroup {
  int rank = -1, world_size = 0;
  std::shared_ptr<comm::Store> store;  // PythonStore over torch's default store
};

// Holds no Python state: called without the GIL.
absl::StatusOr<std::shared_ptr<comm::Job>> JoinedJob(const comm::RendezvousOptions& rendezvous,
                                                     const TorchGroup& torch) {
  std::lock_guard<std::mutex> lock(job_mu);
  if (shared_job != nullptr && job_pid != ::getpid()) {
    new std::shared_ptr<comm::Job>(std::move(shared_job));  // a forked child: the parent's job, not ours
    shared_job = nullptr;
  }
  if (shared_job == nullptr) {
    DDPIO_ASSIGN_OR_RETURN(comm::RankInfo info, comm::DiscoverRank(comm::CurrentEnvironment()));
    comm::RendezvousOptions ro = rendezvous;
    if (torch.rank >= 0) {
      // The launcher's variables and torch's process group must describe the same job. A world
      // of one from a Slurm or Open MPI task is a single task spawning its own processes
      // (mp.spawn inside an allocation): torch's group is then the job.
      const bool spawned_in_task = info.world_size == 1 && (info.source == "slurm" || info.source == "openmpi");
      if (info.source != "single process" && !spawned_in_task &&
          (info.rank != torch.rank || info.world_size != torch.world_size)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "torch.distributed is rank ", torch.rank, " of ", torch.world_size, " but the launcher (", info.source,
            ") says rank ", info.rank, " of ", info.world_size,
            ": the process group and the environment must describe the same job"));
      }
      info.rank = torch.rank;
      info.world_size = torch.world_size;
      info.source = "torch.distributed";
      info.agent_store = false;
      ro.external_store = std::make_shared<comm::PrefixStore>("ddpio", torch.store);
      ro.external_store_name = "torch.distributed's store";
    }
    if (ro.backend == comm::BackendKind::kAuto) ro.backend = comm::BackendKind::kGloo;  // host memory
    DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<comm::Job> job, comm::Job::Join(info, ro));
    shared_job = std::move(job);
    job_pid = ::getpid();
  }
  return shared_job;
}

// The CUDA runtime of a device, made once and kept for the process's life: pinned slots and
// device buffers of held batches are freed through it whenever their last tensor goes.
absl::StatusOr<loader::CudaRuntime*> CudaFor(int device) {
  static std::mutex mu;
  static auto* runtimes = new std::map<int, std::unique_ptr<loader::CudaRuntime>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = runtimes->find(device);
  if (it == runtimes->end()) {
    std::string why;
    std::unique_ptr<loader::CudaRuntime> cuda = loader::MakeCudaRuntime(&why, device);
    if (cuda == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("device cuda:", device, " asked for, but ddpio cannot use it: ", why));
    }
    it = runtimes->emplace(device, std::move(cuda)).first;
  }
  return it->second.get();
}

template <typename T>
T Take(py::dict& o, const char* key, T fallback) {
  if (!o.contains(key)) return fallback;
  T v = o[key].cast<T>();
  o.attr("pop")(key);
  return v;
}

template <typename E>
E TakeEnum(py::dict& o, const char* key, E fallback, absl::StatusOr<E> (*parse)(std::string_view)) {
  if (!o.contains(key)) return fallback;
  const std::string name = Take<std::string>(o, key, "");
  absl::StatusOr<E> v = parse(name);
  if (!v.ok()) ThrowStatus(absl::InvalidArgumentError(absl::StrCat(key, ": ", v.status().message())));
  return *v;
}

absl::StatusOr<loader::OutputFormat> ParseOutput(std::string_view name) {
  if (name == "uint8") return loader::OutputFormat::kUint8Nhwc;
  if (name == "float") return loader::OutputFormat::kFloatNchw;
  return absl::InvalidArgumentError(absl::StrCat("unknown output \"", std::string(name), "\" (uint8 or float)"));
}


std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

// The options dict of ddpio.Loader (already checked for ranges there) as PipelineOptions; a key
// left over is a TypeError, as for an unknown keyword.
PipelineOptions MakeOptions(const std::string& data, py::dict o, comm::RendezvousOptions* rendezvous,
                            TorchGroup* torch) {
  PipelineOptions p;
  torch->rank = Take<int>(o, "torch_rank", -1);
  torch->world_size = Take<int>(o, "torch_world_size", 0);
  if (o.contains("torch_store")) {
    torch->store = std::make_shared<PythonStore>(o["torch_store"], "torch.distributed's store");
    o.attr("pop")("torch_store");
  }
  p.data = data;
  p.group_size = Take<int>(o, "group_size", 1);
  p.layout = TakeEnum(o, "layout", comm::LayoutKind::kContiguous, &comm::ParseLayoutKind);
  broadcast::FeederOptions& f = p.feeder;
  f.mode = TakeEnum(o, "mode", f.mode, &broadcast::ParseFeedMode);
  f.payload = TakeEnum(o, "payload", f.payload, &broadcast::ParseFeedPayload);
  f.readers = TakeEnum(o, "readers", f.readers, &broadcast::ParseFeedReaders);
  f.relay = TakeEnum(o, "relay", f.relay, &broadcast::ParseFeedRelay);
  f.read_ahead = Take<int>(o, "read_ahead", f.read_ahead);
  f.depth = Take<int>(o, "depth", f.depth);
  f.timeout = Millis(Take<double>(o, "timeout", 120.0));
  rendezvous->timeout = f.timeout;
  f.sampler.shuffle = Take<bool>(o, "shuffle", true);
  f.sampler.seed = Take<uint64_t>(o, "seed", 0);
  f.sampler.padding = TakeEnum(o, "padding", f.sampler.padding, &sampler::ParsePadding);
  f.sampler.permutation = TakeEnum(o, "permutation", f.sampler.permutation, &sampler::ParsePermutationKind);
  f.sampler.warn_repeated_epoch = false;  // ddpio.Loader warns itself, naming set_epoch
  loader::LoaderOptions& l = f.loader;
  l.seed = f.sampler.seed;
  l.batch_size = Take<uint64_t>(o, "batch_size", l.batch_size);
  l.drop_last = Take<bool>(o, "drop_last", l.drop_last);
  l.workers = Take<int>(o, "workers", l.workers);
  l.prefetch = Take<int>(o, "prefetch", l.prefetch);
  l.output = TakeEnum(o, "output", l.output, &ParseOutput);
  l.mean = Take<std::array<float, 3>>(o, "mean", l.mean);
  l.stddev = Take<std::array<float, 3>>(o, "std", l.stddev);
  l.decode = TakeEnum(o, "decode", l.decode, &loader::ParseDecodeMode);
  l.bad_samples = TakeEnum(o, "bad_samples", l.bad_samples, &loader::ParseBadSamplePolicy);
  l.held_batches = Take<int>(o, "held_batches", l.held_batches);
  l.held_timeout = Millis(Take<double>(o, "held_timeout", 10.0));
  if (Take<bool>(o, "copy_beyond_held", false)) l.held_overflow = loader::LoaderOptions::HeldOverflow::kCopy;
  const int device = Take<int>(o, "device_index", -1);
  const int pin = Take<int>(o, "pin_device", -1);
  if (device < 0 && pin >= 0) {
    // Slots in memory CUDA knows as pinned (cudaHostAlloc), so that torch's
    // .cuda(non_blocking=True) of a batch is an asynchronous DMA; plain page-locked memory if not.
    absl::StatusOr<loader::CudaRuntime*> cuda = CudaFor(pin);
    if (cuda.ok()) f.cuda = *cuda;
  }
  if (device >= 0) {
    // Staged on the GPU by the loader, on its own stream; handed out once the copy is done.
    f.cuda = ValueOrThrow(CudaFor(device));
    l.copy_to_device = true;
  }
  loader::AugmentOptions& a = l.augment;
  a.train = Take<bool>(o, "train", a.train);
  a.size = Take<int>(o, "image_width", a.size);
  a.height = Take<int>(o, "image_height", a.height);
  a.resize_size = Take<int>(o, "resize_size", a.resize_size);
  a.scale_min = Take<double>(o, "scale_min", a.scale_min);
  a.scale_max = Take<double>(o, "scale_max", a.scale_max);
  a.ratio_min = Take<double>(o, "ratio_min", a.ratio_min);
  a.ratio_max = Take<double>(o, "ratio_max", a.ratio_max);
  a.flip_probability = Take<double>(o, "flip", a.flip_probability);
  if (!o.empty()) {
    throw py::type_error(absl::StrCat("unknown option ", py::str(o.attr("keys")()).cast<std::string>()));
  }
  return p;
}

// A view of `n` elements of type T at `data`, whose base keeps the batch's hold.
template <typename T>
py::array View(const void* data, std::vector<py::ssize_t> shape, const py::object& base) {
  return py::array_t<T>(shape, reinterpret_cast<const T*>(data), base);
}

class PyPipeline {
 public:
  PyPipeline(const std::string& data, py::dict options) {
    comm::RendezvousOptions rendezvous;
    TorchGroup torch;
    PipelineOptions o = MakeOptions(data, std::move(options), &rendezvous, &torch);
    output_ = o.feeder.loader.output;
    width_ = o.feeder.loader.augment.out_width();
    height_ = o.feeder.loader.augment.out_height();
    absl::StatusOr<std::unique_ptr<Pipeline>> p;
    {
      py::gil_scoped_release release;
      absl::StatusOr<std::shared_ptr<comm::Job>> job = JoinedJob(rendezvous, torch);
      if (job.ok()) {
        job_ = *std::move(job);
        // Collective: a rank that fails here closes its group, so the others fail at once too.
        p = Pipeline::Open(*job_, o);
        if (!p.ok()) job_->MarkFailed();  // rank 0 must not wait for this rank at the end
      } else {
        p = job.status();
      }
    }
    pipeline_ = ValueOrThrow(std::move(p));
  }
  ~PyPipeline() {
    if (::getpid() != pid_) {
      // A forked child (a DataLoader worker that got a copy): the threads and connections belong
      // to the parent. Tearing them down here would join threads that do not exist in this
      // process and talk on the parent's sockets — leave them alone.
      (void)pipeline_.release();
      new std::shared_ptr<comm::Job>(std::move(job_));
      return;
    }
    py::gil_scoped_release release;
    pipeline_.reset();  // joins the loader's threads
  }

  // Runs f(pipeline) without the GIL, one call at a time: a Pipeline is driven by one thread at
  // a time, and Python threads may share a loader (a second next() waits for the first).
  template <typename F>
  auto Call(F&& f) const {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    return f(*pipeline_);
  }

  void StartEpoch(uint64_t epoch, uint64_t start) {
    ThrowIfError(Call([&](Pipeline& p) { return p.StartEpoch(epoch, start); }));
  }

  // (images, labels, indices, valid, epoch, step, device_images), or None at the end of the
  // epoch. images: uint8 (n, H, W, 3) or float32 (n, 3, H, W), viewing the slot; labels a copy
  // (int64); device_images: the address of the same bytes on the GPU (the copy is complete), or
  // None — kept alive by `images`, whose base holds the batch.
  py::object Next() {
    absl::StatusOr<loader::HeldBatch> held = Call([](Pipeline& p) { return p.NextHeld(); });
    if (absl::IsOutOfRange(held.status())) return py::none();
    loader::HeldBatch taken = ValueOrThrow(std::move(held));
    const loader::Batch& b = taken.batch;
    auto* keep = new std::shared_ptr<void>(std::move(taken.hold));
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
    const auto n = static_cast<py::ssize_t>(b.size), w = static_cast<py::ssize_t>(width_),
               h = static_cast<py::ssize_t>(height_);
    py::array images = output_ == loader::OutputFormat::kUint8Nhwc ? View<uint8_t>(b.data, {n, h, w, 3}, base)
                                                                    : View<float>(b.data, {n, 3, h, w}, base);
    // Labels, indices and valid flags are copies (bytes per batch): keeping them — a list of a
    // run's indices, a metric — never pins the slot; only the images view it.
    py::array_t<int64_t> labels(n), indices(n);
    py::array_t<bool> valid(n);
    for (py::ssize_t i = 0; i < n; ++i) {
      labels.mutable_at(i) = b.labels[i];
      indices.mutable_at(i) = static_cast<int64_t>(b.indices[i]);
      valid.mutable_at(i) = b.valid[i] != 0;
    }
    py::object device = py::none();
    if (b.device_data != nullptr) device = py::int_(reinterpret_cast<uintptr_t>(b.device_data));
    return py::make_tuple(images, labels, indices, valid, b.epoch, b.step, device);
  }

  py::dict Counters() const {
    const broadcast::FeederCounters c = Call([](Pipeline& p) { return p.counters(); });
    py::dict d;
    d["records_read"] = c.records_read;
    d["bytes_read"] = c.bytes_read;
    d["bytes_sent"] = c.bytes_sent;
    d["bytes_received"] = c.bytes_received;
    d["messages_sent"] = c.messages_sent;
    d["messages_received"] = c.messages_received;
    d["network_wait_s"] = c.network_wait_ns / 1e9;
    d["loader_wait_s"] = c.loader_wait_ns / 1e9;
    d["batches"] = c.batches;
    d["images"] = c.images;
    d["batches_copied"] = c.batches_copied;
    return d;
  }

  uint64_t BatchesInEpoch(uint64_t epoch) const {
    // (a permutation of the dataset: without the GIL)
    return ValueOrThrow(Call([&](Pipeline& p) { return p.BatchesInEpoch(epoch); }));
  }
  const comm::RankInfo& info() const { return job_->info(); }

  void Close() {
    Call([](Pipeline& p) {
      p.Close();
      return 0;
    });
  }

 private:
  const pid_t pid_ = ::getpid();  // the process whose threads run the pipeline
  mutable std::mutex mu_;  // one call into the pipeline at a time (Call)
  std::shared_ptr<comm::Job> job_;  // outlives the pipeline (declared first)
  std::unique_ptr<Pipeline> pipeline_;
  loader::OutputFormat output_ = loader::OutputFormat::kUint8Nhwc;
  int width_ = 0, height_ = 0;
};

}  // namespace

void BindPipeline(py::module_& m) {
  py::class_<PyPipeline>(m, "Pipeline")
      .def(py::init<const std::string&, py::dict>(), py::arg("data"), py::arg("options"))
      .def("start_epoch", &PyPipeline::StartEpoch, py::arg("epoch"), py::arg("start") = 0)
      .def("next", &PyPipeline::Next)
      .def("counters", &PyPipeline::Counters)
      .def("batches_in_epoch", &PyPipeline::BatchesInEpoch, py::arg("epoch"))
      .def_property_readonly("num_batches", [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.NumBatches(); }); })
      .def_property_readonly("resume_position",
                             [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.ResumePosition(); }); })
      .def_property_readonly("dataset_size", [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.dataset_size(); }); })
      .def_property_readonly("is_leader", [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.is_leader(); }); })
      .def_property_readonly("rank", [](PyPipeline& p) { return p.info().rank; })
      .def_property_readonly("world_size", [](PyPipeline& p) { return p.info().world_size; })
      .def_property_readonly("group_size",
                             [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.layout().group_size(); }); })
      .def_property_readonly(
          "group_rank", [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.layout().group_rank(q.rank()); }); })
      .def_property_readonly("num_groups",
                             [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.layout().group_ws(); }); })
      .def("mark_failed", [](PyPipeline& p) {
        p.Call([](Pipeline& q) {
          q.MarkFailed();
          return 0;
        });
      })
      .def("close", &PyPipeline::Close);
  m.def(
      "leave_job",
      [] {
        std::shared_ptr<comm::Job> job;
        {
          std::lock_guard<std::mutex> lock(job_mu);
          job.swap(shared_job);
        }
        if (job != nullptr && job_pid != ::getpid()) {
          new std::shared_ptr<comm::Job>(std::move(job));  // a forked child: the parent's job
          return;
        }
        py::gil_scoped_release release;
        job.reset();  // leaves now unless a pipeline still uses it
      },
      "Leaves the job the pipelines of this process joined, once they are gone (at exit).");
}

}  // namespace ddpio::python
