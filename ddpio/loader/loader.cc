#include "ddpio/loader/loader.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/image_sample_kind.h"
#include "ddpio/loader/internal/loader_impl.h"
#include "ddpio/loader/token_sample_kind.h"

namespace ddpio::loader {
namespace {

constexpr EnumName<BadSamplePolicy> kBadSamplePolicies[] = {{BadSamplePolicy::kFail, "fail"},
                                                            {BadSamplePolicy::kSkip, "skip"}};
constexpr EnumName<OutputFormat> kOutputFormats[] = {{OutputFormat::kUint8Nhwc, "uint8"},
                                                     {OutputFormat::kFloatNchw, "float"}};
constexpr EnumName<LoaderOptions::HeldOverflow> kHeldOverflows[] = {
    {LoaderOptions::HeldOverflow::kWait, "wait"}, {LoaderOptions::HeldOverflow::kCopy, "copy"}};

using Clock = std::chrono::steady_clock;

// What the kind of sample leaves to the loader: the dataset, the world, the batch, the holds.
absl::Status CheckOptions(const storage::DatasetReader* reader,
                          const sampler::SamplerOptions& sampler, int rank,
                          const LoaderOptions& options) {
  if (reader != nullptr && sampler.dataset_size != reader->size()) {
    return absl::InvalidArgumentError(absl::StrCat("sampler dataset size ", sampler.dataset_size,
                                                   " differs from the dataset's ", reader->size()));
  }
  if (rank < 0 || rank >= sampler.num_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside the sampler's world of ", sampler.num_replicas));
  }
  if (options.batch_size == 0 || options.prefetch < 1) {
    return absl::InvalidArgumentError("batch size and prefetch must be positive");
  }
  if (options.held_batches < 1) {
    return absl::InvalidArgumentError("held_batches must be at least 1");
  }
  if (options.held_overflow == LoaderOptions::HeldOverflow::kCopy && options.copy_to_device) {
    return absl::InvalidArgumentError("held_overflow copy cannot be combined with copy_to_device");
  }
  return absl::OkStatus();
}

}  // namespace

std::string BadSamplePolicyName(BadSamplePolicy policy) {
  return NameOf(kBadSamplePolicies, policy);
}
absl::StatusOr<BadSamplePolicy> ParseBadSamplePolicy(std::string_view name) {
  return ParseName(kBadSamplePolicies, name, "bad-sample policy");
}
std::string OutputFormatName(OutputFormat format) { return NameOf(kOutputFormats, format); }
absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  return ParseName(kOutputFormats, name, "output");
}
std::string HeldOverflowName(LoaderOptions::HeldOverflow overflow) {
  return NameOf(kHeldOverflows, overflow);
}
absl::StatusOr<LoaderOptions::HeldOverflow> ParseHeldOverflow(std::string_view name) {
  return ParseName(kHeldOverflows, name, "held_overflow");
}

// ---- Loader: the facade ----

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Loader::~Loader() = default;

absl::StatusOr<std::unique_ptr<Loader>> Loader::Create(
    const storage::DatasetReader* reader, const sampler::SamplerOptions& sampler_options, int rank,
    const LoaderOptions& options, device::CudaRuntime* cuda) {
  return internal::LoaderAccess::Wrap(
      Impl::Create(reader, nullptr, sampler_options, rank, options, cuda, nullptr));
}

absl::StatusOr<std::unique_ptr<Loader>> Loader::Create(
    RecordSource* source, const sampler::SamplerOptions& sampler_options, int rank,
    const LoaderOptions& options, device::CudaRuntime* cuda) {
  return internal::LoaderAccess::Wrap(
      Impl::Create(nullptr, source, sampler_options, rank, options, cuda, nullptr));
}

absl::StatusOr<std::unique_ptr<Loader>> internal::LoaderAccess::Wrap(
    absl::StatusOr<std::unique_ptr<Loader::Impl>> impl) {
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<Loader>(new Loader(*std::move(impl)));
}

absl::Status Loader::StartEpoch(uint64_t epoch, uint64_t start) {
  return impl_->StartEpoch(epoch, start);
}
absl::StatusOr<Batch> Loader::Next() { return impl_->Next(); }
absl::StatusOr<HeldBatch> Loader::NextHeld() { return impl_->NextHeld(); }
bool Loader::WaitReady(std::chrono::milliseconds timeout) { return impl_->WaitReady(timeout); }
void Loader::Stop() { impl_->StopEpoch(); }
uint64_t Loader::NumBatches() const { return impl_->NumBatches(); }
const std::optional<sampler::EpochPlan>& Loader::plan() const { return impl_->plan(); }
uint64_t Loader::ResumePosition() const { return impl_->ResumePosition(); }
LoaderStats Loader::stats() const { return impl_->stats(); }
size_t Loader::sample_bytes() const { return impl_->sample_bytes(); }

void internal::SetSampleHookForTest(Loader& loader, SampleHook hook) {
  LoaderAccess::Of(loader).set_sample_hook(std::move(hook));
}

absl::StatusOr<std::unique_ptr<Loader>> internal::CreateLoaderWithKindForTest(
    const storage::DatasetReader* reader, const sampler::SamplerOptions& sampler, int rank,
    const LoaderOptions& options, std::unique_ptr<const SampleKind> kind) {
  return LoaderAccess::Wrap(LoaderAccess::Impl::Create(reader, nullptr, sampler, rank, options,
                                                       nullptr, std::move(kind)));
}

// ---- Creation ----

absl::StatusOr<std::unique_ptr<Loader::Impl>> Loader::Impl::Create(
    const storage::DatasetReader* reader, RecordSource* source,
    const sampler::SamplerOptions& sampler_options, int rank, const LoaderOptions& options,
    device::CudaRuntime* cuda, std::unique_ptr<const SampleKind> kind) {
  DDPIO_RETURN_IF_ERROR(CheckOptions(reader, sampler_options, rank, options));
  if (kind == nullptr && options.seq_len > 0) {
    DDPIO_ASSIGN_OR_RETURN(kind, TokenSampleKind::Create(options.seq_len));
  } else if (kind == nullptr) {
    DDPIO_ASSIGN_OR_RETURN(kind, ImageSampleKind::Create(options));
  }
  auto impl = std::unique_ptr<Impl>(new Impl());
  impl->reader_ = reader;
  impl->source_ = source;
  impl->where_ = reader != nullptr ? reader->path() : source->name();
  DDPIO_ASSIGN_OR_RETURN(auto s, sampler::DistributedSampler::Create(sampler_options));
  impl->sampler_ = std::make_unique<sampler::DistributedSampler>(std::move(s));
  impl->rank_ = rank;
  impl->options_ = options;
  impl->kind_ = std::move(kind);
  impl->sample_bytes_ = impl->kind_->sample_bytes();
  impl->cuda_ = cuda;
  const int workers = options.workers > 0
                          ? options.workers
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  impl->options_.workers = workers;
  impl->share_ = workers > 1 && (reader == nullptr || reader->remote() == nullptr);
  if (options.copy_to_device && cuda != nullptr) {
    DDPIO_ASSIGN_OR_RETURN(impl->stream_, cuda->CreateStream());
  }
  // In flight: up to max(prefetch, workers + 1) batches (one worker: max(prefetch, 1)), plus
  // those the consumer holds (one with Next(); up to held_batches with NextHeld(), allocated when
  // first needed). Batches are handed out in order, so with a window of only `workers` a worker
  // that finished ahead of the oldest batch in flight would wait for it to be delivered before
  // starting another (measured: 2-4% of the images/s of two workers); one batch more lets it go on.
  impl->window_ = static_cast<uint64_t>(std::max(options.prefetch, workers == 1 ? 1 : workers + 1));
  DDPIO_RETURN_IF_ERROR(impl->AllocateSlots());
  DDPIO_RETURN_IF_ERROR(impl->MakeWorkers(workers));
  return impl;
}

absl::Status Loader::Impl::AllocateSlots() {
  auto pool = std::make_shared<SlotPool>(options_.held_batches);
  // (+1: with HeldOverflow::kCopy the consumer takes one more slot while it copies it.)
  const size_t bound = window_ + static_cast<size_t>(options_.held_batches) + 1;
  pool->slots.resize(bound);
  pool->is_held.resize(bound, 0);
  for (uint64_t i = 0; i <= window_; ++i) {
    DDPIO_ASSIGN_OR_RETURN(pool->slots[i], MakeSlot());
    pool->free.push_back(static_cast<int>(i));
  }
  pool->allocated = static_cast<int>(window_ + 1);
  pool_ = std::move(pool);
  return absl::OkStatus();
}

absl::Status Loader::Impl::MakeWorkers(int workers) {
  for (int w = 0; w < workers; ++w) {
    auto worker = std::make_unique<Worker>();
    if (reader_ != nullptr) {
      DDPIO_ASSIGN_OR_RETURN(auto txn, reader_->BeginRead());
      worker->txn.emplace(std::move(txn));
    }
    worker->sample = kind_->NewWorker();
    workers_.push_back(std::move(worker));
  }
  return absl::OkStatus();
}

Loader::Impl::~Impl() {
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

// ---- Slots ----

absl::StatusOr<std::unique_ptr<Loader::Impl::Slot>> Loader::Impl::MakeSlot() const {
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

absl::StatusOr<int> Loader::Impl::TakeSlot() {
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

void Loader::Impl::ReturnSlot(int slot) {
  std::lock_guard<std::mutex> lock(pool_->mu);
  pool_->free.push_back(slot);
}

// ---- Epochs and the consumer ----

void Loader::Impl::StopEpoch() {
  if (pool_ == nullptr) return;  // Create failed before making it: nothing ever started
  stop_ = true;
  if (source_ != nullptr) source_->Wake();  // workers waiting for records see stop_
  {
    std::lock_guard<std::mutex> lock(share_mu_);  // a helper about to wait sees stop_ first
  }
  share_cv_.notify_all();  // helpers waiting for a batch to open see stop_
  map_.reset();            // cancels and joins the workers
  stop_ = false;
  held_.reset();
  // Results never consumed still hold slots: once the workers are gone every slot the consumer
  // does not hold is free.
  std::lock_guard<std::mutex> lock(pool_->mu);
  pool_->free.clear();
  for (int i = 0; i < pool_->allocated; ++i) {
    if (!pool_->is_held[i]) pool_->free.push_back(i);
  }
}

absl::Status Loader::Impl::StartEpoch(uint64_t epoch, uint64_t start) {
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
  map_ = std::make_unique<OrderedParallelMap<absl::StatusOr<int>>>(
      0, batches_.size(), options_.workers, window_,
      [this](uint64_t b, int w) { return Assemble(b, w); },
      share_ ? std::function<void(int)>([this](int w) { Help(w); }) : nullptr);
  return absl::OkStatus();
}

uint64_t Loader::Impl::ResumePosition() const {
  if (!plan_.has_value()) return 0;
  const uint64_t samples = delivered_ == 0 ? 0 : batches_[delivered_ - 1].end;
  return plan_->ConsumedAfter(samples);
}

absl::StatusOr<Batch> Loader::Impl::Next() {
  held_.reset();
  DDPIO_ASSIGN_OR_RETURN(HeldBatch held, NextHeld());
  held_ = std::move(held.hold);
  return held.batch;
}

bool Loader::Impl::WaitReady(std::chrono::milliseconds timeout) {
  if (map_ == nullptr || delivered_ >= batches_.size()) return true;
  return map_->WaitReady(timeout);
}

absl::StatusOr<HeldBatch> Loader::Impl::NextHeld() {
  if (map_ == nullptr) return absl::FailedPreconditionError("Next() before StartEpoch()");
  if (delivered_ >= batches_.size())
    return absl::OutOfRangeError(absl::StrCat("end of epoch ", plan_->epoch()));
  SlotPool& pool = *pool_;
  const bool may_copy = options_.held_overflow == LoaderOptions::HeldOverflow::kCopy;
  absl::Status gate =
      pool.gate.Acquire(may_copy ? std::chrono::milliseconds(0) : options_.held_timeout, where_);
  if (!gate.ok() && !(may_copy && IsHeldLimit(gate))) return gate;
  const bool copy = !gate.ok();  // every hold is taken: this batch goes out as a copy
  const auto t0 = Clock::now();
  std::optional<absl::StatusOr<int>> r = map_->Next();
  wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
  if (!r.has_value() || !r->ok()) {
    if (!copy) pool.gate.Release();
    if (!r.has_value()) return absl::OutOfRangeError(absl::StrCat("end of epoch ", plan_->epoch()));
    return r->status();
  }
  const int s = **r;
  if (copy) {
    HeldBatch copied = CopyBatch(Deliver(s));
    ReturnSlot(s);
    ++copied_total_;
    return copied;
  }
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.is_held[s] = 1;
  }
  Slot& slot = *pool.slots[s];
  HeldBatch held;
  held.hold = std::shared_ptr<void>(&slot, [pool = pool_, s](void*) { pool->Release(s); });
  if (slot.event != nullptr) DDPIO_RETURN_IF_ERROR(cuda_->WaitEvent(slot.event));
  held.batch = Deliver(s);
  return held;
}

Batch Loader::Impl::Deliver(int s) {
  const Slot& slot = *pool_->slots[s];
  Batch batch;
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
  return batch;
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

LoaderStats Loader::Impl::stats() const {
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
