#include "ddpio/pipeline/pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "ddpio/broadcast/group_feeder.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/device/probe.h"
#include "ddpio/loader/token_view.h"
#include "ddpio/pipeline/internal/feeder_options.h"
#include "ddpio/pipeline/internal/shared_index.h"
#include "ddpio/pipeline/settings.h"
#include "ddpio/storage/dataset_reader.h"
#include "ddpio/storage/remote/remote_dataset.h"
#include "ddpio/storage/token_sequences.h"

namespace ddpio {
namespace {

// A token dataset (documents of token ids) is read as packed sequences, which seq_len sizes;
// without it, and with it for an image dataset, the pipeline says so up front rather than failing
// record by record.
absl::Status CheckDataKind(const std::string& data, const storage::DatasetHeader& header,
                           const PipelineOptions& o) {
  if (storage::IsTokenDataset(header) && o.seq_len == 0) {
    return WithSetting(
        absl::InvalidArgumentError(absl::StrCat(
            data,
            " is a token dataset (documents of token ids for a language model): set seq_len "
            "(ddpio train's --seq-len) to the ids per training sequence")),
        "seq_len");
  }
  if (!storage::IsTokenDataset(header) && o.seq_len != 0) {
    return WithSetting(absl::InvalidArgumentError(absl::StrCat(
                           data,
                           " is an image dataset: seq_len is for a token dataset (leave "
                           "it at 0)")),
                       "seq_len");
  }
  return absl::OkStatus();
}

// The datasets `data` names and, for a token dataset read as sequences, the view's settings:
// one path as it is (images, or one token dataset), or a mixture's sources and weights.
struct DataSources {
  std::vector<std::string> paths;
  storage::SequenceView view;
};
absl::StatusOr<DataSources> DataSourcesOf(const PipelineOptions& o) {
  DataSources d;
  d.view = {o.seq_len, o.seed, o.shuffle, {}};
  if (o.seq_len == 0) {
    d.paths = {o.data};
    return d;
  }
  bool mixture = false;
  DDPIO_ASSIGN_OR_RETURN(std::vector<loader::TokenSourceSpec> specs,
                         loader::ParseTokenSources(o.data, &mixture));
  for (const loader::TokenSourceSpec& s : specs) {
    d.paths.push_back(s.path);
    if (mixture) d.view.weights.push_back(s.weight);
  }
  return d;
}

// What a rank fed by another needs of its data: which dataset(s) the options name (from an object
// store, one GET each), as the identity its leader's reader has.
absl::Status IdentifyData(const PipelineOptions& o, const DataSources& data,
                          const storage::ReaderOptions& ro, std::string* identity,
                          std::optional<storage::remote::RemoteCounters>* store) {
  std::vector<storage::SequenceSource> sources;
  for (const std::string& path : data.paths) {
    DDPIO_ASSIGN_OR_RETURN(storage::DatasetReader::Summary peek,
                           storage::DatasetReader::Peek(path, ro));
    DDPIO_RETURN_IF_ERROR(CheckDataKind(path, peek.header, o));
    if (!store->has_value()) *store = peek.store;
    sources.push_back({std::move(peek.header), peek.completion});
  }
  if (o.seq_len == 0) {
    *identity = storage::DatasetIdentity(sources.front().header, sources.front().completion);
  } else {
    const auto [header, completion] = storage::SequencesOf(sources, data.view);
    *identity = storage::DatasetIdentity(header, completion);
  }
  return absl::OkStatus();
}

bool Reads(const comm::GroupLayout& layout, int rank, const PipelineOptions& o) {
  return layout.is_leader(rank) || o.readers == broadcast::FeedReaders::kAll;
}

absl::Status Closed() { return absl::FailedPreconditionError("the pipeline was closed"); }

// How every rank opens or identifies the dataset: the object store's settings the options carry
// (else the environment's, resolved at open). In a job of several ranks, a rank riding out a
// store's outage must not outlast the peers waiting for it (its group, the trainer's
// collectives): its store requests end within the job's timeout, and the error names the store.
storage::ReaderOptions ReaderOptionsFor(const PipelineOptions& o, const comm::RankInfo& rank) {
  storage::ReaderOptions ro;
  ro.store_settings = o.store_settings;
  ro.store_overrides = ReaderStoreOverrides(o, rank.world_size, rank.local_world_size);
  if (rank.world_size > 1) ro.store_deadline = o.timeout;
  ro.cancel = o.cancel;
  return ro;
}

}  // namespace

struct Pipeline::Rep {
  explicit Rep(comm::GroupLayout group) : layout(std::move(group)) {}

  // What the accessors give once the feeder is closed.
  struct ClosedState {
    uint64_t num_batches = 0, resume_position = 0, dataset_size = 0;
    size_t sample_bytes = 0;
    broadcast::FeederCounters counters;
  };
  ClosedState closed;
  // Destroyed in reverse: the feeder before the dataset it reads, both before an owned job.
  std::unique_ptr<comm::Job> owned_job;
  comm::Job* job = nullptr;
  comm::GroupLayout layout;
  std::unique_ptr<storage::DatasetReader> reader;
  // A rank fed by another, its dataset in an object store: what identifying it took.
  std::optional<storage::remote::RemoteCounters> peeked_store;
  uint64_t order_lanes = 0;  // the block order's lanes (0: the exact order)
  // Over NCCL, the leader's loaders decode into page-locked memory of this runtime, so that
  // staging a batch on the device is an asynchronous DMA, not a copy the driver stages through a
  // bounce buffer while the host waits.
  std::unique_ptr<device::CudaRuntime> cuda;
  std::unique_ptr<broadcast::GroupFeeder> feeder;  // null once closed
  // Time to first batch: from the start of opening to the first batch handed out.
  std::chrono::steady_clock::time_point opened = std::chrono::steady_clock::now();
  std::atomic<uint64_t> first_batch_ns{0};
  void Delivered() {
    if (first_batch_ns.load(std::memory_order_relaxed) != 0) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - opened)
                        .count();
    uint64_t none = 0;
    first_batch_ns.compare_exchange_strong(none, std::max<uint64_t>(1, static_cast<uint64_t>(ns)));
  }
};

Pipeline::Pipeline(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

absl::Status Pipeline::CheckOptions(const PipelineOptions& options) {
  return internal::ValidatePipelineOptions(options);
}

absl::Status Pipeline::Check(const comm::RankInfo& rank, const PipelineOptions& options) {
  DDPIO_RETURN_IF_ERROR(internal::ValidatePipelineOptions(options));
  DDPIO_ASSIGN_OR_RETURN(
      comm::GroupLayout layout,
      comm::GroupLayout::Make(rank.world_size, options.group_size, options.layout));
  DDPIO_ASSIGN_OR_RETURN(DataSources data, DataSourcesOf(options));
  if (Reads(layout, rank.rank, options)) {
    // Which dataset is there (in an object store: its manifest), not its record index yet.
    for (const std::string& path : data.paths) {
      DDPIO_ASSIGN_OR_RETURN(storage::DatasetReader::Summary peek,
                             storage::DatasetReader::Peek(path, ReaderOptionsFor(options, rank)));
      DDPIO_RETURN_IF_ERROR(CheckDataKind(path, peek.header, options));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Open(
    const PipelineOptions& options, const comm::RendezvousOptions& rendezvous) {
  DDPIO_ASSIGN_OR_RETURN(comm::RankInfo info, comm::DiscoverRank(comm::CurrentEnvironment()));
  DDPIO_RETURN_IF_ERROR(Check(info, options));
  comm::RendezvousOptions ro = rendezvous;
  if (ro.backend == comm::BackendKind::kAuto)
    ro.backend = comm::BackendKind::kGloo;  // the feeder moves host memory
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<comm::Job> job,
                         JoinJob(info, std::move(ro), options.timeout));
  absl::StatusOr<std::unique_ptr<Pipeline>> p = Open(*job, options);
  if (!p.ok()) {
    job->MarkFailed();  // leaving on an error: rank 0 must not wait for this rank at the end
    return p.status();
  }
  (*p)->rep_->owned_job = std::move(job);
  return p;
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Open(comm::Job& job,
                                                         const PipelineOptions& options) {
  DDPIO_RETURN_IF_ERROR(internal::ValidatePipelineOptions(options));
  const comm::RankInfo& info = job.info();
  DDPIO_ASSIGN_OR_RETURN(
      comm::GroupLayout layout,
      comm::GroupLayout::Make(info.world_size, options.group_size, options.layout));
  auto rep = std::make_unique<Rep>(std::move(layout));
  Rep& p = *rep;
  p.job = &job;
  // The group first (collective on the job): a reader that then fails to open the dataset closes
  // its group communicator, so its peers fail at once in the feeder's creation instead of waiting
  // out the timeout, and every rank's count of groups on the job stays the same.
  // The group's transport: over an NCCL job decoded batches go device to device; encoded records
  // are decoded on every member's CPU, so they travel in host memory over Gloo.
  const bool nccl = job.backend().kind == comm::BackendKind::kNccl;
  const bool host_memory = nccl && options.payload == broadcast::FeedPayload::kEncoded;
  if (nccl && info.rank == 0) {
    DDPIO_LOG(INFO)
        << "group feeder: " << broadcast::FeedPayloadName(options.payload) << " payload over "
        << (host_memory ? "gloo in host memory (encoded records are decoded on each member's CPU)"
                        : "nccl in device memory (decoded batches go device to device)");
  }
  DDPIO_ASSIGN_OR_RETURN(auto group, job.Group(p.layout, host_memory));
  broadcast::FeederOptions feeder = internal::FeederOptionsFor(options);
  if (options.order == sampler::Order::kBlock) {
    p.order_lanes = sampler::BlockLanes(
        feeder.sampler.block,
        broadcast::StreamSamplerOptions(feeder.sampler, options.mode, p.layout).num_replicas);
  }
  // Every member opens (peers: identifies) the dataset it names, and the group compares them in
  // the feeder's creation: a peer given another dataset, or one it cannot open, fails the whole
  // group naming it, instead of silently training on its leader's data.
  // An object store's index is fetched once for the job, by rank 0 (collective on the world).
  storage::ReaderOptions ro = ReaderOptionsFor(options, info);
  absl::StatusOr<DataSources> data = DataSourcesOf(options);  // the same on every rank
  absl::Status opened = data.status();
  if (opened.ok()) {
    opened = internal::ShareStoreIndex(job.world(), options.data, options.timeout, &ro);
  }
  if (!opened.ok()) {
    // Nothing to open: the feeder's creation below tells the group.
  } else if (Reads(p.layout, info.rank, options)) {
    absl::StatusOr<std::unique_ptr<storage::DatasetReader>> reader =
        options.seq_len > 0 ? loader::OpenPackedSequences(data->paths, ro, data->view)
                            : storage::DatasetReader::Open(options.data, ro);
    absl::Status kind =
        reader.ok() ? CheckDataKind(options.data, (*reader)->header(), options) : absl::OkStatus();
    if (!kind.ok()) {
      opened = kind;
    } else if (reader.ok()) {
      p.reader = *std::move(reader);
      feeder.dataset.identity =
          storage::DatasetIdentity(p.reader->header(), p.reader->completion());
    } else {
      opened = reader.status();
    }
  } else {
    // Fed by another: which dataset it names is all it needs (from an object store, one GET).
    opened = IdentifyData(options, *data, ro, &feeder.dataset.identity, &p.peeked_store);
  }
  if (!opened.ok()) {
    feeder.dataset.error = absl::StrCat(static_cast<int>(opened.code()), " ", opened.message());
  }
  if (p.reader != nullptr && nccl && !host_memory) {
    std::string why;
    const int devices = device::Probe().devices;
    p.cuda = device::MakeCudaRuntime(&why, device::DeviceForRank(info.local_rank, devices));
    if (p.cuda == nullptr)
      DDPIO_LOG(WARNING) << "group feeder: staging from unpinned memory: " << why;
    feeder.cuda = p.cuda.get();
  }
  absl::StatusOr<std::unique_ptr<broadcast::GroupFeeder>> created =
      broadcast::GroupFeeder::Create(p.reader.get(), p.layout, info.rank, std::move(group), feeder);
  if (!opened.ok()) return opened;  // this rank's own error says most (the others name this rank)
  DDPIO_ASSIGN_OR_RETURN(p.feeder, std::move(created));
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(rep)));
}

absl::Status Pipeline::StartEpoch(uint64_t epoch, uint64_t start) {
  return rep_->feeder ? rep_->feeder->StartEpoch(epoch, start) : Closed();
}

absl::StatusOr<loader::Batch> Pipeline::Next() {
  if (!rep_->feeder) return Closed();
  absl::StatusOr<loader::Batch> batch = rep_->feeder->Next();
  if (batch.ok()) rep_->Delivered();
  return batch;
}

bool Pipeline::WaitReady(std::chrono::milliseconds timeout) {
  return rep_->feeder ? rep_->feeder->WaitReady(timeout) : true;
}

absl::StatusOr<loader::HeldBatch> Pipeline::NextHeld() {
  if (!rep_->feeder) return Closed();
  absl::StatusOr<loader::HeldBatch> batch = rep_->feeder->NextHeld();
  if (batch.ok()) rep_->Delivered();
  return batch;
}

uint64_t Pipeline::NumBatches() const {
  return rep_->feeder ? rep_->feeder->NumBatches() : rep_->closed.num_batches;
}

absl::StatusOr<uint64_t> Pipeline::BatchesInEpoch(uint64_t epoch) const {
  if (!rep_->feeder) return Closed();
  return rep_->feeder->BatchesInEpoch(epoch);
}

uint64_t Pipeline::ResumePosition() const {
  return rep_->feeder ? rep_->feeder->ResumePosition() : rep_->closed.resume_position;
}

broadcast::FeederCounters Pipeline::counters() const {
  broadcast::FeederCounters c = rep_->feeder ? rep_->feeder->counters() : rep_->closed.counters;
  c.time_to_first_batch_ns = rep_->first_batch_ns.load(std::memory_order_relaxed);
  return c;
}

uint64_t Pipeline::order_lanes() const { return rep_->order_lanes; }

uint64_t Pipeline::dataset_size() const {
  return rep_->feeder ? rep_->feeder->dataset_size() : rep_->closed.dataset_size;
}

size_t Pipeline::sample_bytes() const {
  return rep_->feeder ? rep_->feeder->sample_bytes() : rep_->closed.sample_bytes;
}

const storage::DatasetReader* Pipeline::dataset() const { return rep_->reader.get(); }
std::optional<storage::remote::RemoteCounters> Pipeline::store_counters() const {
  if (rep_->reader != nullptr && rep_->reader->remote() != nullptr)
    return rep_->reader->remote()->counters();
  return rep_->peeked_store;
}
const comm::GroupLayout& Pipeline::layout() const { return rep_->layout; }
int Pipeline::rank() const { return rep_->job->info().rank; }
bool Pipeline::is_leader() const { return rep_->layout.is_leader(rank()); }
comm::Job& Pipeline::job() { return *rep_->job; }
void Pipeline::MarkFailed() { rep_->job->MarkFailed(); }

void Pipeline::Close() {
  broadcast::GroupFeeder* f = rep_->feeder.get();
  if (f == nullptr) return;
  rep_->closed = {f->NumBatches(), f->ResumePosition(), f->dataset_size(), f->sample_bytes(),
                  f->counters()};
  rep_->feeder.reset();
}

Pipeline::~Pipeline() = default;

}  // namespace ddpio
