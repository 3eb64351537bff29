// Pipeline: the one entry point for a trainer. Given a dataset, this rank's place in the job and
// one options struct, it gives the rank its batches — whatever the group size, mode and payload:
// the group's leader (or every rank, with readers kAll) opens the dataset, the group
// communicator is created, and the group feeder feeds the rank.
//
//   ddpio::PipelineOptions o;
//   o.data = "/data/train.lmdb";
//   o.group_size = 8;                                      // one reader per 8 ranks
//   o.batch_size = 256;
//   auto pipeline = ddpio::Pipeline::Open(o);              // joins the job from the environment
//   for (uint64_t epoch = 0; epoch < epochs; ++epoch) {
//     DDPIO_RETURN_IF_ERROR((*pipeline)->StartEpoch(epoch));
//     absl::StatusOr<ddpio::loader::Batch> batch;
//     while ((batch = (*pipeline)->Next()).ok()) Train(*batch);
//     if (!absl::IsOutOfRange(batch.status())) return batch.status();   // a real error
//   }
//
// Open(options) discovers the rank the way trainers do (torchrun, Slurm, Open MPI, or alone) and
// joins the job; Open(job, options) uses a job the caller joined (JoinJob, to create several
// pipelines — training and validation — on one job: every rank must open them in the same order).
// Batches are the DistributedSampler's (shard) or the group's (replicate), exactly what the rank
// would read for itself (docs/FEEDER.md). Next() is OutOfRange at the end of an epoch (any other
// error is a real one: stop the loop on OutOfRange only); DataLoss for a corrupt record or a
// group out of step, Unavailable for a lost peer, DeadlineExceeded past `timeout`.
// Thread-compatible: one thread drives a pipeline.
#ifndef DDPIO_PIPELINE_PIPELINE_H_
#define DDPIO_PIPELINE_PIPELINE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "ddpio/comm/rendezvous.h"
#include "ddpio/loader/loader.h"
#include "ddpio/pipeline/pipeline_options.h"
#include "ddpio/storage/remote/remote_options.h"

namespace ddpio {

class Pipeline {
 public:
  // Checks what can be checked before joining (the layout; the dataset on ranks that read it), so
  // a mistake fails every rank at once instead of leaving the others in the rendezvous.
  // InvalidArgument for a bad layout; the dataset's errors (NotFound, DataLoss, ...).
  static absl::Status Check(const comm::RankInfo& rank, const PipelineOptions& options);
  // The settings alone, against the requirements pipeline_options.h states (not the dataset nor
  // the world): InvalidArgument naming the setting (SettingsOf in common/status_macros.h). Check
  // and Open run it too; front ends (the Python package) run it to check once, as the library does.
  static absl::Status CheckOptions(const PipelineOptions& options);

  // Joins the job (rank from the environment: comm/rank_info.h; JoinJob with `rendezvous`, whose
  // backend kAuto means Gloo here, and options.timeout) and opens the pipeline on it.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Open(
      const PipelineOptions& options, const comm::RendezvousOptions& rendezvous = {});
  // On a job the caller joined (and keeps alive longer than the pipeline). Collective on the job:
  // a rank that fails here closes its group, so its peers fail at once too.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Open(comm::Job& job,
                                                        const PipelineOptions& options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Every rank calls StartEpoch with the same arguments (`start`: entries of the epoch already
  // consumed, from ResumePosition), also after a data error (a new run). FailedPrecondition after
  // Close() or after a failure that broke the group's connections.
  absl::Status StartEpoch(uint64_t epoch, uint64_t start = 0);
  // This rank's next batch, valid until the next Next / StartEpoch; OutOfRange at the end of the
  // epoch. FailedPrecondition after Close().
  absl::StatusOr<loader::Batch> Next();
  // The next batch, kept by the caller for as long as it holds `hold` — past Next, StartEpoch,
  // Close and the pipeline's end — zero-copy: the batch is the loader's slot (or the received
  // buffer). At most options.held_batches at once: asking for one more waits up to
  // options.held_timeout for a release, then fails ResourceExhausted (or, with held_overflow
  // kCopy, hands out a copy).
  absl::StatusOr<loader::HeldBatch> NextHeld();
  // Whether NextHeld has its batch (or an error, or the epoch's end) at hand, waiting up to
  // `timeout`; consumes nothing. For a caller that must see signals while it waits (Python's
  // Ctrl-C): wait in slices, then call NextHeld.
  bool WaitReady(std::chrono::milliseconds timeout);

  // After Close() these give the values they had when it was closed (BatchesInEpoch fails).
  uint64_t NumBatches() const;
  // Batches this rank gets in a whole epoch (from position 0), without starting it.
  absl::StatusOr<uint64_t> BatchesInEpoch(uint64_t epoch) const;
  // The position to resume this epoch from after the batches delivered so far.
  uint64_t ResumePosition() const;
  broadcast::FeederCounters counters() const;
  uint64_t dataset_size() const;
  // The block order's lanes (options.block_lanes, else one per reader stream: the world's ranks
  // in shard mode, its groups in replicate): what a checkpoint records so that a resume on
  // another world size keeps the epoch's order. 0 in the exact order.
  uint64_t order_lanes() const;
  size_t sample_bytes() const;  // bytes of one output sample
  // The dataset, on ranks that read it (null on the others).
  const storage::DatasetReader* dataset() const;
  // A dataset in an object store (data = s3://...): what this rank asked of the store — a reader
  // its requests, records and cache hits; a rank fed by another the manifest it read. nullopt for
  // a local dataset.
  std::optional<storage::remote::RemoteCounters> store_counters() const;
  const comm::GroupLayout& layout() const;
  int rank() const;
  bool is_leader() const;
  comm::Job& job();

  // Stops and releases the feeder now (it is released with the pipeline otherwise). Afterwards
  // StartEpoch and Next fail; counters, sizes and positions keep their last values.
  void Close();

  // Tells the job this rank leaves because of an error (Job::MarkFailed), so that rank 0 does not
  // wait for it at the end of the job. For trainers that let Open(options) join the job.
  void MarkFailed();

 private:
  struct Rep;
  explicit Pipeline(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

// Joins the job `rank` belongs to — the one way ddpio's pipelines, trainer and commands join:
// `rendezvous` (store, addresses, backend: kAuto picks NCCL when a device is usable,
// comm/backend.h) with every wait of the rendezvous and of the connections bounded by `timeout`.
// Every rank calls it with the same options. Sets the rank printed on every log line of the
// process (SetLogRank). Job::Join's errors.
absl::StatusOr<std::unique_ptr<comm::Job>> JoinJob(const comm::RankInfo& rank,
                                                   comm::RendezvousOptions rendezvous,
                                                   std::chrono::milliseconds timeout);

}  // namespace ddpio

#endif  // DDPIO_PIPELINE_PIPELINE_H_
