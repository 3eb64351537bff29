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
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "bindings.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/pipeline/pipeline.h"
#include "ddpio/storage/dataset_info.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/trainer/step_report.h"
#include "interruptible.h"
#include "python_store.h"
#include "settings_binding.h"
#include "status.h"
#include "step_report_binding.h"

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
  std::string store_host;              // the TCPStore behind it, when it is one (heartbeats)
  int store_port = 0;
};

// Holds no Python state: called without the GIL.
absl::StatusOr<std::shared_ptr<comm::Job>> JoinedJob(std::chrono::milliseconds timeout,
                                                     const TorchGroup& torch) {
  std::lock_guard<std::mutex> lock(job_mu);
  if (shared_job != nullptr && job_pid != ::getpid()) {
    new std::shared_ptr<comm::Job>(
        std::move(shared_job));  // a forked child: the parent's job, not ours
    shared_job = nullptr;
  }
  if (shared_job == nullptr) {
    DDPIO_ASSIGN_OR_RETURN(comm::RankInfo info, comm::DiscoverRank(comm::CurrentEnvironment()));
    comm::RendezvousOptions ro;
    ro.backend = comm::BackendKind::kGloo;  // the pipelines' data moves in host memory
    if (torch.rank >= 0) {
      // The launcher's variables and torch's process group must describe the same job. A world
      // of one from a Slurm or Open MPI task is a single task spawning its own processes
      // (mp.spawn inside an allocation): torch's group is then the job.
      const bool spawned_in_task =
          info.world_size == 1 &&
          (info.source == comm::RankSource::kSlurm || info.source == comm::RankSource::kOpenMpi);
      if (info.source != comm::RankSource::kSingleProcess && !spawned_in_task &&
          (info.rank != torch.rank || info.world_size != torch.world_size)) {
        return absl::InvalidArgumentError(
            absl::StrCat("torch.distributed is rank ", torch.rank, " of ", torch.world_size,
                         " but the launcher (", comm::RankSourceName(info.source), ") says rank ",
                         info.rank, " of ", info.world_size,
                         ": the process group and the environment must describe the same job"));
      }
      info.rank = torch.rank;
      info.world_size = torch.world_size;
      info.source = comm::RankSource::kTorchDistributed;
      info.agent_store = false;
      ro.external_store = std::make_shared<comm::PrefixStore>("ddpio", torch.store);
      ro.external_store_name = "torch.distributed's store";
      ro.heartbeat_store_host = torch.store_host;
      ro.heartbeat_store_port = torch.store_port;
    }
    DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<comm::Job> job, JoinJob(info, std::move(ro), timeout));
    shared_job = std::move(job);
    job_pid = ::getpid();
  }
  return shared_job;
}

// The CUDA runtime of a device, made once and kept for the process's life: pinned slots and
// device buffers of held batches are freed through it whenever their last tensor goes.
absl::StatusOr<device::CudaRuntime*> CudaFor(int device) {
  static std::mutex mu;
  static auto* runtimes = new std::map<int, std::unique_ptr<device::CudaRuntime>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = runtimes->find(device);
  if (it == runtimes->end()) {
    std::string why;
    std::unique_ptr<device::CudaRuntime> cuda = device::MakeCudaRuntime(&why, device);
    if (cuda == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("device cuda:", device, " asked for, but ddpio cannot use it: ", why));
    }
    it = runtimes->emplace(device, std::move(cuda)).first;
  }
  return it->second.get();
}

// What a value of type T is, for "<key> must be <what>, got <value>".
template <typename T>
constexpr const char* KindOf() {
  if constexpr (std::is_same_v<T, bool>) {
    return "True or False";
  } else if constexpr (std::is_unsigned_v<T>) {
    return "an integer not below 0";
  } else if constexpr (std::is_integral_v<T>) {
    return "an integer";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "a number";
  } else {
    return "a str";
  }
}

// The option `key` as T, or `fallback` when absent. Only the type is checked here (a bool is
// not an integer, a float not an int, a negative not unsigned): ranges are the library's
// (Pipeline::CheckOptions), so there is one rule for every front end.
template <typename T>
T Take(py::dict& o, const char* key, T fallback) {
  if (!o.contains(key)) return fallback;
  py::object v = o[key];
  o.attr("pop")(key);
  const bool is_bool = py::isinstance<py::bool_>(v);
  try {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (is_bool) throw py::cast_error();
      if constexpr (std::is_unsigned_v<T>) {
        if (py::isinstance<py::int_>(v) && v < py::int_(0)) throw py::cast_error();
      }
    }
    return v.cast<T>();
  } catch (const py::cast_error&) {
    throw py::value_error(
        absl::StrCat(key, " must be ", KindOf<T>(), ", got ", py::repr(v).cast<std::string>()));
  }
}

// The library's check of the settings (Pipeline::CheckOptions), its error prefixed with the
// Loader's keyword where that is not the setting's own name.
void CheckSettings(const PipelineOptions& o) {
  absl::Status st = Pipeline::CheckOptions(o);
  if (st.ok()) return;
  for (const std::string& setting : SettingsOf(st)) {
    const std::string keyword = LoaderKeyword(setting);
    if (keyword != setting) st = Annotate(st, keyword);
  }
  ThrowStatus(st);
}

// The options dict of ddpio.Loader as PipelineOptions: the settings by their table names
// (settings.h), checked as they are set, plus the torch group and the device; a key absent keeps
// the library's default, a key left over is a TypeError, as for an unknown keyword.
PipelineOptions MakeOptions(const std::string& data, py::dict o, TorchGroup* torch) {
  PipelineOptions p;
  torch->rank = Take<int>(o, "torch_rank", -1);
  torch->world_size = Take<int>(o, "torch_world_size", 0);
  if (o.contains("torch_store")) {
    torch->store = std::make_shared<PythonStore>(o["torch_store"], "torch.distributed's store");
    o.attr("pop")("torch_store");
  }
  torch->store_host = Take<std::string>(o, "torch_store_host", "");
  torch->store_port = Take<int>(o, "torch_store_port", 0);
  p.data = data;
  TakeSettings(o, &p);  // every setting of the table, by its own name
  const int device = Take<int>(o, "device_index", -1);
  const int pin = Take<int>(o, "pin_device", -1);
  if (device < 0 && pin >= 0) {
    // Slots in memory CUDA knows as pinned (cudaHostAlloc), so that torch's
    // .cuda(non_blocking=True) of a batch is an asynchronous DMA; plain page-locked memory if not.
    absl::StatusOr<device::CudaRuntime*> cuda = CudaFor(pin);
    if (cuda.ok()) p.cuda = *cuda;
  }
  if (device >= 0) {
    // Staged on the GPU by the loader, on its own stream; handed out once the copy is done.
    p.cuda = ValueOrThrow(CudaFor(device));
    p.copy_to_device = true;
  }
  if (!o.empty()) {
    throw py::type_error(
        absl::StrCat("unknown option ", py::str(o.attr("keys")()).cast<std::string>()));
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
  PyPipeline(const std::string& data, py::dict options) : data_(data) {
    TorchGroup torch;
    PipelineOptions o = MakeOptions(data, std::move(options), &torch);
    CheckSettings(o);  // before joining: a bad setting must not leave the other ranks waiting
    output_ = o.output;
    width_ = o.image_size;
    height_ = o.image_height > 0 ? o.image_height : o.image_size;
    // Joining and opening may wait long (peers not there yet, a store riding out an outage):
    // Ctrl-C must still reach Python, and gives up the store's requests at once.
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    o.cancel = cancel;
    absl::StatusOr<std::unique_ptr<Pipeline>> p = absl::UnknownError("not opened");
    try {
      RunInterruptibly(
          [&] {
            absl::StatusOr<std::shared_ptr<comm::Job>> job = JoinedJob(o.timeout, torch);
            if (!job.ok()) {
              p = job.status();
              return;
            }
            job_ = *std::move(job);
            // Collective: a rank that fails here closes its group, so the others fail at once too.
            p = Pipeline::Open(*job_, o);
            if (!p.ok()) {
              job_->MarkFailed();  // rank 0 must not wait for this rank at the end
              return;
            }
            const comm::RankInfo& info = job_->info();
            const comm::GroupLayout& layout = (*p)->layout();
            const bool reads =
                layout.is_leader(info.rank) || o.readers == broadcast::FeedReaders::kAll;
            profiler_ = std::make_unique<trainer::StepProfiler>(
                info.rank, info.rank / std::max(1, info.local_world_size),
                reads ? -1 : layout.leader(info.rank));
            timeout_ = o.timeout;
          },
          *cancel);
    } catch (const py::error_already_set&) {
      // Interrupted once it had opened: this rank leaves (rank 0 must not wait for it), and the
      // pipeline's threads are joined without the GIL, as ~PyPipeline does.
      if (p.ok()) {
        py::gil_scoped_release release;
        job_->MarkFailed();
        p->reset();
      }
      throw;
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
    const auto enter = std::chrono::steady_clock::now();
    // Waits in slices, so that Ctrl-C (Python's SIGINT handler, run by PyErr_CheckSignals on the
    // main thread) interrupts a wait for a store or a leader within a slice, not when its retries
    // or the job's timeout end. Nothing is consumed: the next call continues where this stood.
    while (!Call([](Pipeline& p) { return p.WaitReady(std::chrono::milliseconds(100)); })) {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
    absl::StatusOr<loader::HeldBatch> held = Call([](Pipeline& p) { return p.NextHeld(); });
    const auto out = std::chrono::steady_clock::now();
    if (absl::IsOutOfRange(held.status())) {
      have_out_ = false;  // between epochs (validation, a checkpoint) is not a step
      return py::none();
    }
    if (!held.ok()) {
      // A lost peer: say which ranks vanished (the census waits, without the GIL).
      absl::Status failure;
      {
        py::gil_scoped_release release;
        failure = job_->WithCensus(held.status());
      }
      ThrowIfError(failure);
    }
    loader::HeldBatch taken = ValueOrThrow(std::move(held));
    const loader::Batch& b = taken.batch;
    // A step for the straggler report: the wait in here, and the loop's time since the last
    // batch (forward, backward, all-reduce: "outside" the loader).
    const double outside = have_out_ ? std::chrono::duration<double>(enter - last_out_).count() : 0;
    profiler_->AddStep(std::chrono::duration<double>(out - enter).count(), 0, outside,
                       Call([](Pipeline& p) { return p.counters(); }));
    last_out_ = out;
    have_out_ = true;
    ++steps_;
    epoch_ = b.epoch;
    auto* keep = new std::shared_ptr<void>(std::move(taken.hold));
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
    const auto n = static_cast<py::ssize_t>(b.size), w = static_cast<py::ssize_t>(width_),
               h = static_cast<py::ssize_t>(height_);
    py::array images = output_ == loader::OutputFormat::kUint8Nhwc
                           ? View<uint8_t>(b.data, {n, h, w, 3}, base)
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
    d["time_to_first_batch_s"] = c.time_to_first_batch_ns / 1e9;  // from opening; 0 until then
    d["reads_directly"] = c.direct;  // a group of one: its loader reads the dataset itself
    // Threads decoding JPEGs for this rank: its loader's workers; a leader that sends decoded
    // pixels counts the group's (the group size times its workers), its peers 0.
    d["decode_threads"] = c.decode_threads;
    // A dataset in an object store: what this rank asked of it.
    const std::optional<storage::remote::RemoteCounters> store =
        Call([](Pipeline& p) { return p.store_counters(); });
    if (store.has_value()) {
      d["store_requests"] = store->requests;
      d["store_retries"] = store->retries;
      d["store_bytes"] = store->bytes;
      d["store_records_fetched"] = store->records_fetched;
      d["store_memory_hits"] = store->memory_hits;
      d["store_disk_hits"] = store->disk_hits;
      d["store_misses"] = store->misses;
      d["store_refetches"] = store->refetches;
      d["store_chunk_records"] = store->chunk_records;
      d["store_peer_chunks"] = store->peer_chunks;
      d["store_served_evicted"] = store->served_evicted;
      d["store_throttles"] = store->throttles;
      d["store_rate_limit_per_s"] = store->rate_limit_per_s;
    }
    return d;
  }

  uint64_t BatchesInEpoch(uint64_t epoch) const {
    // (a permutation of the dataset: without the GIL)
    return ValueOrThrow(Call([&](Pipeline& p) { return p.BatchesInEpoch(epoch); }));
  }
  const comm::RankInfo& info() const { return job_->info(); }

  // The dataset's content digest (storage::ContentDigest: a copy is the same dataset, another
  // conversion is not), which ddpio.Loader's resume states carry. A rank that reads has the
  // dataset open; a rank fed by another identifies it (from an object store: its manifest) when
  // first asked, not when the pipeline is made, so making a loader opens its dataset once.
  std::string DatasetDigest() {
    absl::StatusOr<std::string> digest = Call([&](Pipeline& p) -> absl::StatusOr<std::string> {
      if (digest_.empty()) {
        if (const storage::DatasetReader* r = p.dataset(); r != nullptr) {
          digest_ = storage::ContentDigest(r->header(), r->completion());
        } else {
          storage::ReaderOptions ro;
          ro.store_deadline = timeout_;  // fed by a leader: a job of several ranks
          DDPIO_ASSIGN_OR_RETURN(storage::DatasetReader::Summary s,
                                 storage::DatasetReader::Peek(data_, ro));
          digest_ = storage::ContentDigest(s.header, s.completion);
        }
      }
      return digest_;
    });
    return ValueOrThrow(std::move(digest));
  }

  // The straggler report of the steps since the last one, gathered from every rank
  // (collective).
  py::dict Report() {
    trainer::RankSteps mine = profiler_->Take();
    absl::StatusOr<std::vector<trainer::RankSteps>> ranks;
    {
      py::gil_scoped_release release;
      ranks = trainer::GatherStepReport(job_->world(), mine, timeout_);
    }
    trainer::StepReport report =
        trainer::Analyze(ValueOrThrow(std::move(ranks)), epoch_, report_first_, steps_,
                         /*loop_only=*/true);
    report_first_ = steps_;
    return StepReportDict(report);
  }

  // Which ranks of the job stopped answering (comm/liveness.h): {"vanished": [ranks],
  // "addresses": {rank: address}, "store_lost": bool, "line": str}.
  py::dict Census() {
    comm::Census c;
    {
      py::gil_scoped_release release;
      c = job_->TakeCensus();
    }
    py::dict d, addresses;
    py::list vanished;
    for (int r : c.vanished) vanished.append(r);
    for (const auto& [r, a] : c.addresses) addresses[py::int_(r)] = a;
    d["vanished"] = vanished;
    d["addresses"] = addresses;
    d["store_lost"] = c.store_lost;
    d["line"] = c.line;
    return d;
  }

  void Close() {
    Call([](Pipeline& p) {
      p.Close();
      return 0;
    });
  }

 private:
  const pid_t pid_ = ::getpid();    // the process whose threads run the pipeline
  const std::string data_;          // the dataset as this rank named it
  mutable std::mutex mu_;           // one call into the pipeline at a time (Call)
  std::string digest_;              // DatasetDigest, once known; guarded by mu_
  std::shared_ptr<comm::Job> job_;  // outlives the pipeline (declared first)
  std::unique_ptr<Pipeline> pipeline_;
  // The straggler report's steps (Report); touched with the GIL held only.
  std::unique_ptr<trainer::StepProfiler> profiler_;
  std::chrono::milliseconds timeout_{0};
  std::chrono::steady_clock::time_point last_out_;
  bool have_out_ = false;
  uint64_t steps_ = 0, report_first_ = 0, epoch_ = 0;
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
      .def("census", &PyPipeline::Census)
      .def("report", &PyPipeline::Report)
      .def("batches_in_epoch", &PyPipeline::BatchesInEpoch, py::arg("epoch"))
      .def_property_readonly(
          "num_batches",
          [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.NumBatches(); }); })
      .def_property_readonly(
          "resume_position",
          [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.ResumePosition(); }); })
      .def_property_readonly(
          "dataset_size",
          [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.dataset_size(); }); })
      .def_property_readonly(
          "order_lanes",
          [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.order_lanes(); }); })
      .def_property_readonly("dataset_digest", &PyPipeline::DatasetDigest)
      .def_property_readonly(
          "is_leader",
          [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.is_leader(); }); })
      .def_property_readonly("rank", [](PyPipeline& p) { return p.info().rank; })
      .def_property_readonly("world_size", [](PyPipeline& p) { return p.info().world_size; })
      .def_property_readonly(
          "group_size",
          [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.layout().group_size(); }); })
      .def_property_readonly(
          "group_rank",
          [](PyPipeline& p) {
            return p.Call([](Pipeline& q) { return q.layout().group_rank(q.rank()); });
          })
      .def_property_readonly(
          "num_groups",
          [](PyPipeline& p) { return p.Call([](Pipeline& q) { return q.layout().group_ws(); }); })
      .def("mark_failed",
           [](PyPipeline& p) {
             p.Call([](Pipeline& q) {
               q.MarkFailed();
               return 0;
             });
           })
      .def("close", &PyPipeline::Close);
  m.def("pipeline_defaults", &SettingDefaults,
        "The library's default settings, {name: default}, from its settings table.");
  m.def("pipeline_settings", &SettingTable,
        "The library's settings table: name, type, default, min, max, choices, optional, range "
        "and help of every setting.");
  m.def(
      "check_pipeline_options",
      [](py::dict options) {
        TorchGroup unused;
        CheckSettings(MakeOptions("", std::move(options), &unused));
      },
      py::arg("options"),
      "Checks ddpio.Loader's options as the library does (ValueError naming the setting).");
  m.def(
      "leave_job",
      [] {
        std::shared_ptr<comm::Job> job;
        {
          // (without the GIL: a loader opening on another thread holds job_mu while it joins,
          // and may need the GIL for torch's store)
          py::gil_scoped_release release;
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
