#include "ddpio/pipeline/pipeline.h"

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio {
namespace {

bool Reads(const comm::GroupLayout& layout, int rank, const PipelineOptions& o) {
  return layout.is_leader(rank) || o.feeder.readers == broadcast::FeedReaders::kAll;
}

}  // namespace

absl::Status Pipeline::Check(const comm::RankInfo& rank, const PipelineOptions& options) {
  DDPIO_ASSIGN_OR_RETURN(comm::GroupLayout layout,
                         comm::GroupLayout::Make(rank.world_size, options.group_size, options.layout));
  if (Reads(layout, rank.rank, options)) {
    DDPIO_RETURN_IF_ERROR(storage::DatasetReader::Open(options.data, {}).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Open(const PipelineOptions& options,
                                                          const comm::RendezvousOptions& rendezvous) {
  DDPIO_ASSIGN_OR_RETURN(comm::RankInfo info, comm::DiscoverRank(comm::CurrentEnvironment()));
  DDPIO_RETURN_IF_ERROR(Check(info, options));
  comm::RendezvousOptions ro = rendezvous;
  if (ro.backend == comm::BackendKind::kAuto) ro.backend = comm::BackendKind::kGloo;  // the feeder moves host memory
  DDPIO_ASSIGN_OR_RETURN(std::unique_ptr<comm::Job> job, comm::Job::Join(info, ro));
  absl::StatusOr<std::unique_ptr<Pipeline>> p = Open(*job, options);
  if (!p.ok()) {
    job->MarkFailed();  // leaving on an error: rank 0 must not wait for this rank at the end
    return p.status();
  }
  (*p)->owned_job_ = std::move(job);
  return p;
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Open(comm::Job& job, const PipelineOptions& options) {
  const comm::RankInfo& info = job.info();
  DDPIO_ASSIGN_OR_RETURN(comm::GroupLayout layout,
                         comm::GroupLayout::Make(info.world_size, options.group_size, options.layout));
  auto p = std::unique_ptr<Pipeline>(new Pipeline(std::move(layout)));
  p->job_ = &job;
  // The group first (collective on the job): a reader that then fails to open the dataset closes
  // its group communicator, so its peers fail at once in the feeder's creation instead of waiting
  // out the timeout, and every rank's count of groups on the job stays the same.
  // The group's transport: over an NCCL job decoded batches go device to device; encoded records
  // are decoded on every member's CPU, so they travel in host memory over Gloo.
  const bool nccl = job.backend().kind == comm::BackendKind::kNccl;
  const bool host_memory = nccl && options.feeder.payload == broadcast::FeedPayload::kEncoded;
  if (nccl && info.rank == 0) {
    DDPIO_LOG(INFO) << "group feeder: " << broadcast::FeedPayloadName(options.feeder.payload) << " payload over "
                    << (host_memory ? "gloo in host memory (encoded records are decoded on each member's CPU)"
                                    : "nccl in device memory (decoded batches go device to device)");
  }
  DDPIO_ASSIGN_OR_RETURN(auto group, job.Group(p->layout_, host_memory));
  broadcast::FeederOptions feeder = options.feeder;
  // Every member opens (peers: identifies) the dataset it names, and the group compares them in
  // the feeder's creation: a peer given another dataset, or one it cannot open, fails the whole
  // group naming it, instead of silently training on its leader's data.
  feeder.dataset.path = options.data;
  absl::Status opened = absl::OkStatus();
  if (Reads(p->layout_, info.rank, options)) {
    absl::StatusOr<std::unique_ptr<storage::DatasetReader>> reader = storage::DatasetReader::Open(options.data, {});
    if (reader.ok()) {
      p->reader_ = *std::move(reader);
      feeder.dataset.identity = storage::DatasetIdentity(p->reader_->header(), p->reader_->completion());
    } else {
      opened = reader.status();
    }
  } else {
    absl::StatusOr<std::unique_ptr<storage::DatasetReader>> peek = storage::DatasetReader::Open(options.data, {});
    if (peek.ok()) {
      feeder.dataset.identity = storage::DatasetIdentity((*peek)->header(), (*peek)->completion());
    } else {
      opened = peek.status();
    }
  }
  if (!opened.ok()) {
    feeder.dataset.error = absl::StrCat(static_cast<int>(opened.code()), " ", opened.message());
  }
  if (p->reader_ != nullptr && nccl && !host_memory) {
    std::string why;
    const int devices = comm::ProbeNcclDevices().devices;
    p->cuda_ = loader::MakeCudaRuntime(&why, devices > 0 ? info.local_rank % devices : 0);
    if (p->cuda_ == nullptr) DDPIO_LOG(WARNING) << "group feeder: staging from unpinned memory: " << why;
    feeder.cuda = p->cuda_.get();
  }
  absl::StatusOr<std::unique_ptr<broadcast::GroupFeeder>> created =
      broadcast::GroupFeeder::Create(p->reader_.get(), p->layout_, info.rank, std::move(group), feeder);
  if (!opened.ok()) return opened;  // this rank's own error says most (the others name this rank)
  DDPIO_ASSIGN_OR_RETURN(p->feeder_, std::move(created));
  return p;
}

void Pipeline::Close() {
  if (!feeder_) return;
  closed_ = {feeder_->NumBatches(), feeder_->ResumePosition(), feeder_->dataset_size(), feeder_->sample_bytes(),
             feeder_->counters()};
  feeder_.reset();
}

Pipeline::~Pipeline() = default;

}  // namespace ddpio
