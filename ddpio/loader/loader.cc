#include "ddpio/loader/loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/log.h"
#include "ddpio/common/ordered_parallel_map.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/hold_gate.h"

namespace ddpio::loader {
namespace {

// Records asked for ahead of the batch being assembled when they come from an object store:
// this many batches, at most this many records (a few tens of MB of a budget of 256 MiB).
constexpr uint64_t kRemoteLookaheadBatches = 8;
constexpr uint64_t kRemoteLookaheadRecords = 2048;

}  // namespace

namespace {
constexpr EnumName<BadSamplePolicy> kBadSamplePolicies[] = {{BadSamplePolicy::kFail, "fail"},
                                                            {BadSamplePolicy::kSkip, "skip"}};
}  // namespace

std::string BadSamplePolicyName(BadSamplePolicy policy) {
  return NameOf(kBadSamplePolicies, policy);
}
absl::StatusOr<BadSamplePolicy> ParseBadSamplePolicy(std::string_view name) {
  return ParseName(kBadSamplePolicies, name, "bad-sample policy");
}

using Clock = std::chrono::steady_clock;

struct Loader::Slot {
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
struct Loader::SlotPool {
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

struct Loader::Worker {
  SampleProcessor processor;
  std::optional<storage::ReadTxn> txn;
  std::vector<uint8_t> hwc;        // one sample, for float output
  std::vector<uint64_t> prefetch;  // the indices of the batch being read
  std::atomic<uint64_t> read_ns{0}, decode_ns{0}, augment_ns{0}, collate_ns{0};
  std::atomic<uint64_t> images{0}, bad{0}, payload_bytes{0};
  std::atomic<uint64_t> shared{0};  // samples assembled for another worker's batch
};

// A batch being assembled. Its own worker claims its samples one at a time, in order; so do
// workers helping it (Help). A failure stops the claims, and the batch's error is that of the
// lowest position that failed: every position below it was claimed and assembled, so the error
// is the one a single worker going in order would have met. Guarded by share_mu_.
struct Loader::OpenBatch {
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

struct Loader::Pipeline {
  OrderedParallelMap<absl::StatusOr<int>> map;
  template <typename... Args>
  explicit Pipeline(Args&&... args) : map(std::forward<Args>(args)...) {}
};

absl::StatusOr<std::unique_ptr<Loader>> Loader::Create(
    const storage::DatasetReader* reader, const sampler::SamplerOptions& sampler_options, int rank,
    const LoaderOptions& options, device::CudaRuntime* cuda) {
  if (sampler_options.dataset_size != reader->size()) {
    return absl::InvalidArgumentError(absl::StrCat("sampler dataset size ",
                                                   sampler_options.dataset_size,
                                                   " differs from the dataset's ", reader->size()));
  }
  return CreateImpl(reader, nullptr, sampler_options, rank, options, cuda);
}

absl::StatusOr<std::unique_ptr<Loader>> Loader::Create(
    RecordSource* source, const sampler::SamplerOptions& sampler_options, int rank,
    const LoaderOptions& options, device::CudaRuntime* cuda) {
  return CreateImpl(nullptr, source, sampler_options, rank, options, cuda);
}

absl::StatusOr<std::unique_ptr<Loader>> Loader::CreateImpl(
    const storage::DatasetReader* reader, RecordSource* source,
    const sampler::SamplerOptions& sampler_options, int rank, const LoaderOptions& options,
    device::CudaRuntime* cuda) {
  if (rank < 0 || rank >= sampler_options.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " outside the sampler's world of ", sampler_options.num_replicas));
  }
  if (options.batch_size == 0 || options.augment.size <= 0 || options.augment.height < 0 ||
      options.prefetch < 1) {
    return absl::InvalidArgumentError("batch size, output size and prefetch must be positive");
  }
  auto loader = std::unique_ptr<Loader>(new Loader());
  loader->reader_ = reader;
  loader->source_ = source;
  loader->where_ = reader != nullptr ? reader->path() : source->name();
  DDPIO_ASSIGN_OR_RETURN(auto s, sampler::DistributedSampler::Create(sampler_options));
  loader->sampler_ = std::make_unique<sampler::DistributedSampler>(std::move(s));
  loader->rank_ = rank;
  loader->options_ = options;
  loader->cuda_ = cuda;
  int workers = options.workers > 0
                    ? options.workers
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  loader->options_.workers = workers;
  loader->share_ = workers > 1 && (reader == nullptr || reader->remote() == nullptr);
  const size_t pixels =
      static_cast<size_t>(options.augment.out_width()) * options.augment.out_height() * 3;
  loader->sample_bytes_ =
      options.output == OutputFormat::kFloatNchw ? pixels * sizeof(float) : pixels;
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) {
      loader->lut_[c][v] = (v / 255.0f - options.mean[c]) / options.stddev[c];
    }
  }
  if (options.held_batches < 1)
    return absl::InvalidArgumentError("held_batches must be at least 1");
  if (options.held_overflow == LoaderOptions::HeldOverflow::kCopy && options.copy_to_device) {
    return absl::InvalidArgumentError("held_overflow copy cannot be combined with copy_to_device");
  }
  if (options.copy_to_device && cuda != nullptr) {
    DDPIO_ASSIGN_OR_RETURN(loader->stream_, cuda->CreateStream());
  }
  // In flight: up to max(prefetch, workers + 1) batches (one worker: max(prefetch, 1)), plus
  // those the consumer holds (one with Next(); up to held_batches with NextHeld(), allocated when
  // first needed). Batches are handed out in order, so with a window of only `workers` a worker
  // that finished ahead of the oldest batch in flight would wait for it to be delivered before
  // starting another (measured: 2-4% of the images/s of two workers); one batch more lets it go on.
  loader->window_ =
      static_cast<uint64_t>(std::max(options.prefetch, workers == 1 ? 1 : workers + 1));
  auto pool = std::make_shared<SlotPool>(options.held_batches);
  // (+1: with HeldOverflow::kCopy the consumer takes one more slot while it copies it.)
  const size_t bound = loader->window_ + static_cast<size_t>(options.held_batches) + 1;
  pool->slots.resize(bound);
  pool->is_held.resize(bound, 0);
  for (uint64_t i = 0; i <= loader->window_; ++i) {
    DDPIO_ASSIGN_OR_RETURN(pool->slots[i], loader->MakeSlot());
    pool->free.push_back(static_cast<int>(i));
  }
  pool->allocated = static_cast<int>(loader->window_ + 1);
  loader->pool_ = std::move(pool);
  for (int w = 0; w < workers; ++w) {
    auto worker = std::make_unique<Worker>();
    if (reader != nullptr) {
      DDPIO_ASSIGN_OR_RETURN(auto txn, reader->BeginRead());
      worker->txn.emplace(std::move(txn));
    }
    worker->hwc.resize(pixels);
    loader->workers_.push_back(std::move(worker));
  }
  return loader;
}

absl::StatusOr<std::unique_ptr<Loader::Slot>> Loader::MakeSlot() const {
  auto slot = std::make_unique<Slot>();
  DDPIO_ASSIGN_OR_RETURN(slot->data,
                         AllocateHostBuffer(sample_bytes_ * options_.batch_size, cuda_));
  slot->labels.resize(options_.batch_size);
  slot->indices.resize(options_.batch_size);
  slot->valid.resize(options_.batch_size);
  if (stream_ != nullptr) {
    slot->cuda = cuda_;
    DDPIO_RETURN_IF_ERROR(cuda_->DeviceAlloc(&slot->device, slot->data.size()));
    DDPIO_ASSIGN_OR_RETURN(slot->event, cuda_->CreateEvent());
  }
  return slot;
}

Loader::~Loader() {
  StopEpoch();
  // The slots go with the pool, when the last held batch is released: copies into them that
  // workers queued for batches never handed out must be done before then.
  if (stream_ != nullptr) {
    if (absl::Status st = cuda_->SyncStream(stream_); !st.ok()) {
      DDPIO_LOG(WARNING) << "loader: waiting for the device copies at shutdown: " << st;
    }
    cuda_->DestroyStream(stream_);
  }
}

absl::StatusOr<int> Loader::TakeSlot() {
  SlotPool& pool = *pool_;
  std::lock_guard<std::mutex> lock(pool.mu);
  if (pool.free.empty()) {
    // Every slot is in flight or held: in flight are at most window_, held at most
    // held_batches, so below the bound a new slot is due (allocated once, kept).
    if (pool.allocated >= static_cast<int>(pool.slots.size())) {
      return absl::InternalError(
          absl::StrCat("loader of ", where_, ": no free batch slot of ", pool.allocated));
    }
    DDPIO_ASSIGN_OR_RETURN(pool.slots[pool.allocated], MakeSlot());
    return pool.allocated++;
  }
  int s = pool.free.back();
  pool.free.pop_back();
  return s;
}

void Loader::ReturnSlot(int slot) {
  std::lock_guard<std::mutex> lock(pool_->mu);
  pool_->free.push_back(slot);
}

void Loader::Stop() { StopEpoch(); }

void Loader::StopEpoch() {
  if (pool_ == nullptr) return;  // Create failed before making it: nothing ever started
  stop_ = true;
  if (source_ != nullptr) source_->Wake();  // workers waiting for records see stop_
  {
    std::lock_guard<std::mutex> lock(share_mu_);  // a helper about to wait sees stop_ first
  }
  share_cv_.notify_all();  // helpers waiting for a batch to open see stop_
  pipeline_.reset();       // cancels and joins the workers
  stop_ = false;
  held_.reset();
  // Results never consumed still hold slots: once the pipeline is gone every slot the consumer
  // does not hold is free.
  std::lock_guard<std::mutex> lock(pool_->mu);
  pool_->free.clear();
  for (int i = 0; i < pool_->allocated; ++i) {
    if (!pool_->is_held[i]) pool_->free.push_back(i);
  }
}

absl::Status Loader::StartEpoch(uint64_t epoch, uint64_t start) {
  StopEpoch();
  sampler_->SetEpoch(epoch);
  DDPIO_ASSIGN_OR_RETURN(sampler::EpochPlan plan, sampler_->NextPlan(start));
  plan_ = std::move(plan);
  batches_ =
      sampler::MakeBatches(plan_->NumSamples(rank_), options_.batch_size, options_.drop_last);
  delivered_ = 0;
  {
    std::lock_guard<std::mutex> lock(share_mu_);
    unfinished_ = batches_.size();
  }
  pipeline_ = std::make_unique<Pipeline>(
      0, batches_.size(), options_.workers, window_,
      [this](uint64_t b, int w) { return Assemble(b, w); },
      share_ ? std::function<void(int)>([this](int w) { Help(w); }) : nullptr);
  return absl::OkStatus();
}

uint64_t Loader::NumBatches() const { return batches_.size(); }

uint64_t Loader::ResumePosition() const {
  if (!plan_.has_value()) return 0;
  const uint64_t samples = delivered_ == 0 ? 0 : batches_[delivered_ - 1].end;
  return plan_->ConsumedAfter(samples);
}

absl::Status Loader::CheckSourced(const SourcedBatch& batch, uint64_t b,
                                  const sampler::BatchRange& range) const {
  const uint64_t n = range.end - range.begin;
  if (batch.epoch != plan_->epoch() || batch.step != b || batch.indices.size() != n ||
      batch.records.size() != n) {
    return absl::DataLossError(absl::StrCat(
        "out of step with ", where_, ": expected epoch ", plan_->epoch(), " batch ", b, " of ", n,
        " samples, got epoch ", batch.epoch, " batch ", batch.step, " of ", batch.indices.size()));
  }
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t want = plan_->IndexAt(rank_, range.begin + k);
    if (batch.indices[k] != want) {
      return absl::DataLossError(absl::StrCat(
          "out of step with ", where_, ": epoch ", batch.epoch, " batch ", b, " position ", k,
          " holds sample ", batch.indices[k], ", this rank's sampler expects ", want));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<storage::RecordView> Loader::Sourced(const SourcedBatch& batch, uint64_t k,
                                                    uint64_t index) const {
  const std::string what =
      absl::StrCat("sample ", index, " (key ", storage::IndexKeyHex(index), ") from ", where_);
  if (batch.records[k].empty())
    return absl::DataLossError(absl::StrCat(what, ": unreadable at the source"));
  storage::RecordView view;
  const storage::RecordBinding* binding = k < batch.bindings.size() ? &batch.bindings[k] : nullptr;
  absl::Status st =
      storage::DecodeRecord(batch.records[k], /*verify_checksum=*/true, &view, binding);
  if (!st.ok()) return Annotate(st, what);
  return view;
}

absl::Status Loader::FillSample(Slot& slot, uint64_t k, uint64_t index, bool padding,
                                absl::StatusOr<storage::RecordView> record, Worker& w) {
  uint8_t* out = slot.data.data() + k * sample_bytes_;
  slot.indices[k] = index;
  slot.valid[k] = padding ? 0 : 1;
  const bool as_float = options_.output == OutputFormat::kFloatNchw;
  absl::Status st = record.status();
  if (st.ok()) {
    slot.labels[k] = record->label;
    w.payload_bytes += record->payload.size();
    const StageNanos before = w.processor.nanos();
    st = w.processor.Process(*record, index, plan_->epoch(), options_.seed, options_.augment,
                             options_.decode, as_float ? w.hwc.data() : out);
    if (!st.ok()) {
      st = Annotate(
          st, absl::StrCat("sample ", index, " (key ", storage::IndexKeyHex(index), ", source '",
                           std::string(record->source_name), "') of ", where_));
    }
    w.decode_ns += w.processor.nanos().decode - before.decode;
    w.augment_ns += w.processor.nanos().augment - before.augment;
  } else {
    slot.labels[k] = -1;
  }
  if (!st.ok()) {
    if (options_.bad_samples == BadSamplePolicy::kFail ||
        st.code() != absl::StatusCode::kDataLoss) {
      return st;
    }
    // Skip: a deterministic substitute (zeros), flagged invalid, counted and listed.
    std::memset(out, 0, sample_bytes_);
    slot.valid[k] = 0;
    ++w.bad;
    std::lock_guard<std::mutex> lock(mu_);
    if (skipped_.size() < 100) skipped_.push_back({index, std::string(st.message())});
    return absl::OkStatus();
  }
  if (as_float) {
    const auto t2 = Clock::now();
    const size_t plane =
        static_cast<size_t>(options_.augment.out_width()) * options_.augment.out_height();
    float* f = reinterpret_cast<float*>(out);
    const uint8_t* p = w.hwc.data();
    for (size_t i = 0; i < plane; ++i) {
      f[i] = lut_[0][p[3 * i]];
      f[plane + i] = lut_[1][p[3 * i + 1]];
      f[2 * plane + i] = lut_[2][p[3 * i + 2]];
    }
    w.collate_ns += static_cast<uint64_t>((Clock::now() - t2).count());
  }
  ++w.images;
  return absl::OkStatus();
}

absl::StatusOr<int> Loader::Assemble(uint64_t b, int worker) {
  absl::StatusOr<int> slot = AssembleBatch(b, *workers_[worker]);
  bool last;
  {
    std::lock_guard<std::mutex> lock(share_mu_);
    last = --unfinished_ == 0;
  }
  if (last) share_cv_.notify_all();  // helpers waiting for a batch to open: none will
  return slot;
}

absl::StatusOr<int> Loader::AssembleBatch(uint64_t b, Worker& w) {
  DDPIO_ASSIGN_OR_RETURN(const int s, TakeSlot());
  Slot& slot = *pool_->slots[s];
  const sampler::BatchRange range = batches_[b];
  slot.size = range.end - range.begin;
  absl::Status st;
  std::shared_ptr<const SourcedBatch> sourced;
  if (source_ != nullptr) {
    const auto t0 = Clock::now();
    auto fetched = source_->Fetch(plan_->epoch(), b, stop_);
    w.read_ns += static_cast<uint64_t>((Clock::now() - t0).count());
    if (fetched.ok()) {
      sourced = *std::move(fetched);
      st = CheckSourced(*sourced, b, range);
    } else {
      st = fetched.status();
    }
  }
  if (sourced == nullptr && w.txn.has_value() && options_.prefetch_records) {
    const auto t0 = Clock::now();
    w.prefetch.clear();
    // From an object store a record is a round trip: ask for the batches that come next too, so
    // that they arrive while these are decoded (what is held or on the way is not asked again).
    uint64_t end = range.end;
    if (reader_ != nullptr && reader_->remote() != nullptr) {
      end = batches_[std::min<uint64_t>(b + kRemoteLookaheadBatches, batches_.size() - 1)].end;
      end = std::min<uint64_t>(end, range.begin + kRemoteLookaheadRecords);
      end = std::max(end, range.end);
    }
    for (uint64_t j = range.begin; j < end; ++j) w.prefetch.push_back(plan_->IndexAt(rank_, j));
    (void)w.txn->Prefetch(w.prefetch);  // advice only: Get reports any bad record itself
    w.read_ns += static_cast<uint64_t>((Clock::now() - t0).count());
  }
  if (st.ok()) st = AssembleSamples(b, range, slot, sourced.get(), w);
  if (w.txn.has_value()) w.txn->Reset();  // do not pin old pages between batches
  if (st.ok() && stream_ != nullptr) {
    st =
        cuda_->CopyToDeviceAsync(slot.device, slot.data.data(), slot.size * sample_bytes_, stream_);
    if (st.ok()) st = cuda_->RecordEvent(slot.event, stream_);
  }
  if (!st.ok()) {
    ReturnSlot(s);
    return st;
  }
  return s;
}

absl::Status Loader::AssembleSamples(uint64_t b, const sampler::BatchRange& range, Slot& slot,
                                     const SourcedBatch* sourced, Worker& w) {
  OpenBatch open;
  open.step = b;
  open.range = range;
  open.slot = &slot;
  open.sourced = sourced;
  std::unique_lock<std::mutex> lock(share_mu_);
  if (share_) {
    open_.push_back(&open);
    share_cv_.notify_all();  // a helper waiting for a batch to open
  }
  uint64_t k;
  while (open.Claim(stop_, &k)) AssembleClaimed(open, k, w, /*helping=*/false, lock);
  if (share_) {
    // No helper joins once it is out of open_; the ones on a sample finish it.
    open_.erase(std::find(open_.begin(), open_.end(), &open));
    share_cv_.wait(lock, [&] { return open.helpers == 0; });
  }
  return open.error;
}

void Loader::AssembleClaimed(OpenBatch& open, uint64_t k, Worker& w, bool helping,
                             std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  Notify(open, k, helping, /*done=*/false);
  absl::Status st = AssembleSample(open, k, w, helping);
  lock.lock();
  if (!st.ok()) open.Fail(k, st);
  if (sample_hook_for_test_) {
    lock.unlock();
    Notify(open, k, helping, /*done=*/true, st);
    lock.lock();
  }
}

void Loader::Notify(const OpenBatch& open, uint64_t k, bool helping, bool done,
                    const absl::Status& st) const {
  if (!sample_hook_for_test_) return;
  SampleEvent event;
  event.step = open.step;
  event.position = k;
  event.helping = helping;
  event.done = done;
  event.status = st;
  sample_hook_for_test_(event);
}

absl::Status Loader::AssembleSample(const OpenBatch& open, uint64_t k, Worker& w, bool helping) {
  const uint64_t j = open.range.begin + k, index = plan_->IndexAt(rank_, j);
  absl::StatusOr<storage::RecordView> record;
  if (open.sourced != nullptr) {
    record = Sourced(*open.sourced, k, index);
  } else {
    const auto t0 = Clock::now();
    record = w.txn->Get(index);
    w.read_ns += static_cast<uint64_t>((Clock::now() - t0).count());
  }
  absl::Status st =
      FillSample(*open.slot, k, index, plan_->IsPadding(rank_, j), std::move(record), w);
  if (open.sourced == nullptr) {
    // The decode read the record from the map again; a page lost since Get (the file cut short
    // under the job) read as zeros. A bus error in the map ends the run whatever the bad-sample
    // policy: the file is gone, not one sample, and every later read of it fails too.
    absl::Status mapped = w.txn->CheckMapped();
    if (!mapped.ok()) {
      st = Annotate(mapped, absl::StrCat("sample ", index, " (key ", storage::IndexKeyHex(index),
                                         ") of ", where_));
    }
  }
  if (helping) ++w.shared;
  return st;
}

Loader::OpenBatch* Loader::OldestClaimable() {
  OpenBatch* oldest = nullptr;
  for (OpenBatch* b : open_) {
    if (b->Claimable() && (oldest == nullptr || b->step < oldest->step)) oldest = b;
  }
  return oldest;
}

void Loader::Help(int worker) {
  Worker& w = *workers_[worker];
  std::unique_lock<std::mutex> lock(share_mu_);
  for (;;) {
    OpenBatch* open = nullptr;
    share_cv_.wait(lock, [&] {
      open = OldestClaimable();
      return open != nullptr || unfinished_ == 0 || stop_;
    });
    uint64_t k;
    if (open == nullptr) break;
    if (!open->Claim(stop_, &k)) continue;
    ++open->helpers;
    AssembleClaimed(*open, k, w, /*helping=*/true, lock);
    if (--open->helpers == 0) share_cv_.notify_all();  // its owner may be waiting
  }
  lock.unlock();
  if (w.txn.has_value()) w.txn->Reset();
}

absl::StatusOr<Batch> Loader::Next() {
  held_.reset();
  DDPIO_ASSIGN_OR_RETURN(HeldBatch held, NextHeld());
  held_ = std::move(held.hold);
  return held.batch;
}

bool Loader::WaitReady(std::chrono::milliseconds timeout) {
  if (pipeline_ == nullptr || delivered_ >= batches_.size()) return true;
  return pipeline_->map.WaitReady(timeout);
}

absl::StatusOr<HeldBatch> Loader::NextHeld() {
  if (pipeline_ == nullptr) return absl::FailedPreconditionError("Next() before StartEpoch()");
  if (delivered_ >= batches_.size())
    return absl::OutOfRangeError(absl::StrCat("end of epoch ", plan_->epoch()));
  SlotPool& pool = *pool_;
  const bool may_copy = options_.held_overflow == LoaderOptions::HeldOverflow::kCopy;
  absl::Status gate =
      pool.gate.Acquire(may_copy ? std::chrono::milliseconds(0) : options_.held_timeout, where_);
  if (!gate.ok() && !(may_copy && IsHeldLimit(gate))) return gate;
  const bool copy = !gate.ok();  // every hold is taken: this batch goes out as a copy
  const auto t0 = Clock::now();
  std::optional<absl::StatusOr<int>> r = pipeline_->map.Next();
  wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
  if (!r.has_value() || !r->ok()) {
    if (!copy) pool.gate.Release();
    if (!r.has_value()) return absl::OutOfRangeError(absl::StrCat("end of epoch ", plan_->epoch()));
    return r->status();
  }
  const int s = **r;
  Slot& slot = *pool.slots[s];
  if (copy) {
    Batch view;
    view.epoch = plan_->epoch();
    view.step = delivered_++;
    view.size = slot.size;
    view.data = slot.data.data();
    view.bytes = slot.size * sample_bytes_;
    view.labels = slot.labels.data();
    view.indices = slot.indices.data();
    view.valid = slot.valid.data();
    HeldBatch copied = CopyBatch(view);
    ReturnSlot(s);
    ++batches_total_;
    ++copied_total_;
    return copied;
  }
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.is_held[s] = 1;
  }
  HeldBatch held;
  held.hold = std::shared_ptr<void>(&slot, [pool = pool_, s](void*) { pool->Release(s); });
  if (slot.event != nullptr) DDPIO_RETURN_IF_ERROR(cuda_->WaitEvent(slot.event));
  Batch& batch = held.batch;
  batch.epoch = plan_->epoch();
  batch.step = delivered_++;
  batch.size = slot.size;
  batch.data = slot.data.data();
  batch.bytes = slot.size * sample_bytes_;
  batch.labels = slot.labels.data();
  batch.indices = slot.indices.data();
  batch.valid = slot.valid.data();
  batch.device_data = slot.device;
  ++batches_total_;
  return held;
}

HeldBatch CopyBatch(const Batch& batch) {
  struct Owned {
    std::vector<uint8_t> data;
    std::vector<int32_t> labels;
    std::vector<uint64_t> indices;
    std::vector<uint8_t> valid;
  };
  auto owned = std::make_shared<Owned>();
  const size_t n = static_cast<size_t>(batch.size);
  owned->data.assign(batch.data, batch.data + batch.bytes);
  owned->labels.assign(batch.labels, batch.labels + n);
  owned->indices.assign(batch.indices, batch.indices + n);
  owned->valid.assign(batch.valid, batch.valid + n);
  HeldBatch held;
  held.batch = batch;
  held.batch.data = owned->data.data();
  held.batch.labels = owned->labels.data();
  held.batch.indices = owned->indices.data();
  held.batch.valid = owned->valid.data();
  held.batch.device_data = nullptr;
  held.hold = std::move(owned);
  return held;
}

LoaderStats Loader::stats() const {
  LoaderStats st;
  for (const auto& w : workers_) {
    st.images += w->images;
    st.bad_samples += w->bad;
    st.read_ns += w->read_ns;
    st.decode_ns += w->decode_ns;
    st.augment_ns += w->augment_ns;
    st.collate_ns += w->collate_ns;
    st.payload_bytes += w->payload_bytes;
    st.shared_samples += w->shared;
  }
  st.batches = batches_total_;
  st.copied = copied_total_;
  st.wait_ns = wait_ns_;
  st.workers = static_cast<int>(workers_.size());
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    st.slots = pool_->allocated;
    st.memory = pool_->slots[0]->data.kind();
  }
  st.held = pool_->gate.held();
  st.slot_bytes = static_cast<uint64_t>(st.slots) * sample_bytes_ * options_.batch_size;
  st.slot_allocations = static_cast<uint64_t>(st.slots);
  {
    std::lock_guard<std::mutex> lock(mu_);
    st.skipped = skipped_;
  }
  return st;
}

}  // namespace ddpio::loader
