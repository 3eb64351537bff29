// Pipeline: the one entry point for a trainer. Given a dataset, this rank's place in the job and
// one options struct, it gives the rank its batches — whatever the group size, mode and payload:
// the group's leader (or every rank, with readers kAll) opens the dataset, the group
// communicator is created, and a GroupFeeder feeds the rank.
//
//   ddpio::PipelineOptions o;
//   o.data = "/data/train.lmdb";
//   o.group_size = 8;                                      // one reader per 8 ranks
//   auto pipeline = ddpio::Pipeline::Open(o);              // joins the job from the environment
//   for (uint64_t epoch = 0; epoch < epochs; ++epoch) {
//     DDPIO_RETURN_IF_ERROR((*pipeline)->StartEpoch(epoch));
//     absl::StatusOr<ddpio::loader::Batch> batch;
//     while ((batch = (*pipeline)->Next()).ok()) Train(*batch);
//     if (!absl::IsOutOfRange(batch.status())) return batch.status();   // a real error
//   }
//
// Open(options) discovers the rank the way trainers do (torchrun, Slurm, Open MPI, or alone) and
// joins the job; Open(job, options) uses a job the caller joined (to create several pipelines —
// training and validation — on one job: every rank must open them in the same order). Batches
// are the DistributedSampler's (shard) or the group's (replicate), exactly what the rank would
// read for itself (docs/FEEDER.md). Errors as GroupFeeder's; Next() is OutOfRange at the end of
// an epoch (any other error is a real one: stop the loop on OutOfRange only). Thread-compatible:
// one thread drives a pipeline.
#ifndef DDPIO_PIPELINE_PIPELINE_H_
#define DDPIO_PIPELINE_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ddpio/broadcast/group_feeder.h"
#include "ddpio/loader/cuda_runtime.h"
#include "ddpio/comm/group_layout.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/loader/loader.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio {

struct PipelineOptions {
  std::string data;            // the dataset; opened only by the ranks that read it
  int group_size = 1;          // ranks per group (1: every rank reads for itself)
  comm::LayoutKind layout = comm::LayoutKind::kContiguous;  // contiguous: groups within a node
  // Mode (shard / replicate), payload (encoded / decoded), who reads, the relay, read-ahead,
  // and the sampler and loader settings (batch size, augmentation, workers, ...). Defaults: shard,
  // encoded, leader reading; the loader's defaults (docs/LOADER.md).
  broadcast::FeederOptions feeder;
};

class Pipeline {
 public:
  // Checks what can be checked before joining (the layout; the dataset on ranks that read it), so
  // a mistake fails every rank at once instead of leaving the others in the rendezvous.
  // InvalidArgument for a bad layout; the dataset's errors (NotFound, DataLoss, ...).
  static absl::Status Check(const comm::RankInfo& rank, const PipelineOptions& options);

  // Joins the job (rank from the environment: comm/rank_info.h) and opens the pipeline on it.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Open(const PipelineOptions& options,
                                                        const comm::RendezvousOptions& rendezvous = {});
  // On a job the caller joined (and keeps alive longer than the pipeline).
  static absl::StatusOr<std::unique_ptr<Pipeline>> Open(comm::Job& job, const PipelineOptions& options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // As GroupFeeder: every rank calls StartEpoch with the same arguments; Next() gives this
  // rank's next batch (valid until the next call), OutOfRange at the end of the epoch.
  // FailedPrecondition after Close().
  absl::Status StartEpoch(uint64_t epoch, uint64_t start = 0) {
    return feeder_ ? feeder_->StartEpoch(epoch, start) : Closed();
  }
  absl::StatusOr<loader::Batch> Next() { return feeder_ ? feeder_->Next() : absl::StatusOr<loader::Batch>(Closed()); }
  // The next batch, kept by the caller for as long as it holds `hold` — past Next, StartEpoch,
  // Close and the pipeline's end — zero-copy: the batch is the loader's slot (or the received
  // buffer). At most feeder.loader.held_batches at once: asking for one more waits up to
  // feeder.loader.held_timeout for a release, then fails ResourceExhausted.
  absl::StatusOr<loader::HeldBatch> NextHeld() {
    return feeder_ ? feeder_->NextHeld() : absl::StatusOr<loader::HeldBatch>(Closed());
  }

  // After Close() these give the values they had when it was closed (BatchesInEpoch fails).
  uint64_t NumBatches() const { return feeder_ ? feeder_->NumBatches() : closed_.num_batches; }
  absl::StatusOr<uint64_t> BatchesInEpoch(uint64_t epoch) const {
    return feeder_ ? feeder_->BatchesInEpoch(epoch) : absl::StatusOr<uint64_t>(Closed());
  }
  uint64_t ResumePosition() const { return feeder_ ? feeder_->ResumePosition() : closed_.resume_position; }
  broadcast::FeederCounters counters() const { return feeder_ ? feeder_->counters() : closed_.counters; }
  uint64_t dataset_size() const { return feeder_ ? feeder_->dataset_size() : closed_.dataset_size; }
  size_t sample_bytes() const { return feeder_ ? feeder_->sample_bytes() : closed_.sample_bytes; }
  // The dataset, on ranks that read it (null on the others).
  const storage::DatasetReader* dataset() const { return reader_.get(); }
  const comm::GroupLayout& layout() const { return layout_; }
  int rank() const { return job_->info().rank; }
  bool is_leader() const { return layout_.is_leader(rank()); }
  comm::Job& job() { return *job_; }

  // Stops and releases the feeder now (it is released with the pipeline otherwise). Afterwards
  // StartEpoch and Next fail; counters, sizes and positions keep their last values.
  void Close();

  // Tells the job this rank leaves because of an error (Job::MarkFailed), so that rank 0 does not
  // wait for it at the end of the job. For trainers that let Open(options) join the job.
  void MarkFailed() { job_->MarkFailed(); }

 private:
  explicit Pipeline(comm::GroupLayout layout) : layout_(std::move(layout)) {}
  static absl::Status Closed() { return absl::FailedPreconditionError("the pipeline was closed"); }

  struct ClosedState {
    uint64_t num_batches = 0, resume_position = 0, dataset_size = 0;
    size_t sample_bytes = 0;
    broadcast::FeederCounters counters;
  };
  ClosedState closed_;
  // Destroyed in reverse: the feeder before the dataset it reads, both before an owned job.
  std::unique_ptr<comm::Job> owned_job_;
  comm::Job* job_ = nullptr;
  comm::GroupLayout layout_;
  std::unique_ptr<storage::DatasetReader> reader_;
  // Over NCCL, the leader's loaders decode into page-locked memory of this runtime, so that
  // staging a batch on the device is an asynchronous DMA, not a copy the driver stages through a
  // bounce buffer while the host waits.
  std::unique_ptr<loader::CudaRuntime> cuda_;
  std::unique_ptr<broadcast::GroupFeeder> feeder_;
};

}  // namespace ddpio

#endif  // DDPIO_PIPELINE_PIPELINE_H_
