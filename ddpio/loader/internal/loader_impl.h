// Loader::Impl: everything behind loader.h's facade. loader.cc holds its creation, the batch
// slots and the consumer's side (StartEpoch, NextHeld, stats); loader_worker.cc what a worker
// thread does (a batch's records into its slot through the sample kind, and at an epoch's end
// helping finish the others' batches). Not installed.
//
// Threads: one consumer thread calls the methods Loader forwards; the OrderedParallelMap's worker
// threads run Assemble and Help, each with a Worker (and a SampleWorker) of its own. Locks:
// pool_->mu (the slots), share_mu_ (the open batches), mu_ (skipped_); none is taken while
// another is held.
#ifndef DDPIO_LOADER_INTERNAL_LOADER_IMPL_H_
#define DDPIO_LOADER_INTERNAL_LOADER_IMPL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ddpio/common/ordered_parallel_map.h"
#include "ddpio/device/cuda_runtime.h"
#include "ddpio/loader/hold_gate.h"
#include "ddpio/loader/host_memory.h"
#include "ddpio/loader/internal/loader_testing.h"
#include "ddpio/loader/loader.h"
#include "ddpio/loader/record_source.h"
#include "ddpio/loader/sample_kind.h"
#include "ddpio/sampler/distributed_sampler.h"
#include "ddpio/storage/dataset_reader.h"

namespace ddpio::loader {

class Loader::Impl {
 public:
  // Exactly one of `reader` and `source`. `kind` makes the samples; null: the kind `options`
  // asks for (images, ImageSampleKind: the only one LoaderOptions names so far). Loader::Create's
  // errors.
  static absl::StatusOr<std::unique_ptr<Impl>> Create(const storage::DatasetReader* reader,
                                                      RecordSource* source,
                                                      const sampler::SamplerOptions& sampler,
                                                      int rank, const LoaderOptions& options,
                                                      device::CudaRuntime* cuda,
                                                      std::unique_ptr<const SampleKind> kind);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Loader's methods, with loader.h's contracts.
  absl::Status StartEpoch(uint64_t epoch, uint64_t start);
  absl::StatusOr<Batch> Next();
  absl::StatusOr<HeldBatch> NextHeld();
  bool WaitReady(std::chrono::milliseconds timeout);
  void StopEpoch();
  uint64_t NumBatches() const { return batches_.size(); }
  const std::optional<sampler::EpochPlan>& plan() const { return plan_; }
  uint64_t ResumePosition() const;
  LoaderStats stats() const;
  size_t sample_bytes() const { return sample_bytes_; }

  // Tests only (internal/loader_testing.h).
  void set_sample_hook(internal::SampleHook hook) { sample_hook_ = std::move(hook); }

 private:
  struct Slot;
  struct SlotPool;
  struct Worker;
  struct OpenBatch;
  Impl() = default;

  // Creation (loader.cc).
  absl::Status AllocateSlots();
  absl::Status MakeWorkers(int workers);

  // Slots (loader.cc).
  absl::StatusOr<std::unique_ptr<Slot>> MakeSlot() const;
  absl::StatusOr<int> TakeSlot();
  void ReturnSlot(int slot);
  // The batch in slot `s`, numbered as the next one delivered.
  Batch Deliver(int s);

  // A worker's batch (loader_worker.cc).
  absl::StatusOr<int> Assemble(uint64_t batch, int worker);
  absl::StatusOr<int> AssembleBatch(uint64_t batch, Worker& w);
  // Batch `b` from the record source, checked against the sampler.
  absl::StatusOr<std::shared_ptr<const SourcedBatch>> FetchSourced(uint64_t b,
                                                                   const sampler::BatchRange& range,
                                                                   Worker& w);
  // Asks the dataset for the records of batch `b` (and, from an object store, those after it).
  void PrefetchRecords(uint64_t b, const sampler::BatchRange& range, Worker& w);
  absl::Status AssembleSamples(uint64_t batch, const sampler::BatchRange& range, Slot& slot,
                               const SourcedBatch* sourced, Worker& w);
  // Assembles position k of `open`, claimed under `lock` (share_mu_), with the lock released
  // meanwhile; records a failure in the batch.
  void AssembleClaimed(OpenBatch& open, uint64_t k, Worker& w, bool helping,
                       std::unique_lock<std::mutex>& lock);
  absl::Status AssembleSample(const OpenBatch& open, uint64_t k, Worker& w, bool helping);
  absl::Status FillSample(Slot& slot, uint64_t k, uint64_t index, bool padding,
                          absl::StatusOr<storage::RecordView> record, Worker& w);
  // A sample that failed with `st`: under kSkip a DataLoss becomes the kind's stand-in, flagged
  // invalid, counted and listed (OK); anything else is returned.
  absl::Status SkipOrFail(Slot& slot, uint64_t k, uint64_t index, absl::Status st, Worker& w);
  // Position k's bytes in `slot` (sample_bytes_ of them).
  absl::Span<uint8_t> SampleData(Slot& slot, uint64_t k) const;
  absl::Status CheckSourced(const SourcedBatch& batch, uint64_t b,
                            const sampler::BatchRange& range) const;
  absl::StatusOr<storage::RecordView> Sourced(const SourcedBatch& batch, uint64_t k,
                                              uint64_t index) const;

  // The epoch's tail (loader_worker.cc): a worker with no batch left to claim helps.
  void Help(int worker);
  OpenBatch* OldestClaimable();
  void Notify(const OpenBatch& open, uint64_t k, bool helping, bool done,
              const absl::Status& st = absl::OkStatus()) const;

  // Constant after Create.
  const storage::DatasetReader* reader_ = nullptr;  // exactly one of reader_ and source_
  RecordSource* source_ = nullptr;
  std::string where_;  // the dataset's path or the source's name, for errors
  std::unique_ptr<sampler::DistributedSampler> sampler_;
  int rank_ = 0;
  LoaderOptions options_;  // with `workers` resolved
  std::unique_ptr<const SampleKind> kind_;
  size_t sample_bytes_ = 0;  // kind_->sample_bytes()
  device::CudaRuntime* cuda_ = nullptr;
  void* stream_ = nullptr;
  uint64_t window_ = 0;  // batches in flight at most: max(prefetch, workers + 1)
  // Workers out of batches help assemble the others' (more than one worker, a local dataset or a
  // record source: from an object store each worker's reads are its own window of requests).
  bool share_ = false;
  std::shared_ptr<SlotPool> pool_;  // shared with the holds of held batches
  std::vector<std::unique_ptr<Worker>> workers_;
  internal::SampleHook sample_hook_;  // tests only; set before StartEpoch

  // Consumer state.
  std::optional<sampler::EpochPlan> plan_;
  std::vector<sampler::BatchRange> batches_;
  uint64_t delivered_ = 0;                                        // batches handed out this epoch
  std::shared_ptr<void> held_;                                    // the batch Next() handed out
  std::unique_ptr<OrderedParallelMap<absl::StatusOr<int>>> map_;  // the epoch's workers
  std::atomic<bool> stop_{false};
  uint64_t wait_ns_ = 0;
  uint64_t batches_total_ = 0;
  uint64_t copied_total_ = 0;

  // The batches being assembled this epoch, open to helpers (an epoch's tail: workers with no
  // batch left to claim take single samples of the oldest one still open).
  std::mutex share_mu_;  // guards open_, unfinished_ and the OpenBatch state
  std::condition_variable share_cv_;
  std::vector<OpenBatch*> open_;
  uint64_t unfinished_ = 0;  // batches of the epoch not yet assembled (or failed)

  mutable std::mutex mu_;               // guards skipped_
  std::vector<SkippedSample> skipped_;  // the first 100
};

struct Loader::Impl::Slot {
  HostBuffer data;
  std::vector<int32_t> labels;
  std::vector<uint64_t> indices;
  std::vector<uint8_t> valid;
  uint64_t size = 0;
  device::CudaRuntime* cuda = nullptr;
  void* device = nullptr;
  void* event = nullptr;
  ~Slot() {
    if (device != nullptr) cuda->DeviceFree(device);
    if (event != nullptr) cuda->DestroyEvent(event);
  }
};

// The slots, shared by the loader and the holds of the batches its consumer keeps, so that a
// held batch outlives the loader. `slots` has room for the bound and fills lazily; a slot is
// free (in `free`), with a worker or waiting for the consumer, or held (`is_held`).
struct Loader::Impl::SlotPool {
  explicit SlotPool(int held_batches) : gate(held_batches) {}
  std::mutex mu;  // guards the rest; gate has its own
  std::vector<std::unique_ptr<Slot>> slots;
  int allocated = 0;
  std::vector<int> free;
  std::vector<char> is_held;
  HoldGate gate;

  void Release(int s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      is_held[s] = 0;
      free.push_back(s);
    }
    gate.Release();
  }
};

// One worker thread's state; its counters are read by stats() on the consumer's thread.
struct Loader::Impl::Worker {
  std::unique_ptr<SampleWorker> sample;  // the kind's, for this thread only
  std::optional<storage::ReadTxn> txn;   // reading the dataset (none with a record source)
  std::vector<uint64_t> prefetch;        // the indices of the batch being read
  std::atomic<uint64_t> read_ns{0}, decode_ns{0}, augment_ns{0}, collate_ns{0};
  std::atomic<uint64_t> images{0}, bad{0}, payload_bytes{0};
  std::atomic<uint64_t> shared{0};  // samples assembled for another worker's batch
};

// A batch being assembled. Its own worker claims its samples one at a time, in order; so do
// workers helping it (Help). A failure stops the claims, and the batch's error is that of the
// lowest position that failed: every position below it was claimed and assembled, so the error
// is the one a single worker going in order would have met. Guarded by share_mu_.
struct Loader::Impl::OpenBatch {
  uint64_t step = 0;
  sampler::BatchRange range;
  Slot* slot = nullptr;
  const SourcedBatch* sourced = nullptr;  // null: read from the dataset
  uint64_t next = 0;                      // the next position to claim
  int helpers = 0;                        // helpers on one of its samples now
  uint64_t failed_at = UINT64_MAX;
  absl::Status error;

  uint64_t size() const { return range.end - range.begin; }
  bool Claimable() const { return next < size(); }
  // The next position into `k`; false when none is left (or the loader stopped: then the batch
  // fails Cancelled at the position it would have claimed).
  bool Claim(bool stop, uint64_t* k) {
    if (!Claimable()) return false;
    if (stop) {
      Fail(next, absl::CancelledError("loader stopped"));
      return false;
    }
    *k = next++;
    return true;
  }
  void Fail(uint64_t k, absl::Status st) {
    if (k < failed_at) {
      failed_at = k;
      error = std::move(st);
    }
    next = size();
  }
};

namespace internal {
// A friend of Loader: makes one around an Impl, and reaches the Impl of one.
struct LoaderAccess {
  using Impl = Loader::Impl;
  // The Loader around `impl` (Impl::Create's result), or its error.
  static absl::StatusOr<std::unique_ptr<Loader>> Wrap(
      absl::StatusOr<std::unique_ptr<Loader::Impl>> impl);
  static Loader::Impl& Of(Loader& loader) { return *loader.impl_; }
};
}  // namespace internal

}  // namespace ddpio::loader

#endif  // DDPIO_LOADER_INTERNAL_LOADER_IMPL_H_
