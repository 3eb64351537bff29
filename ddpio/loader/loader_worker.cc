// What a loader worker thread does: a batch's records into its slot, sample by sample through
// the sample kind, and at an epoch's end helping finish the batches other workers still assemble.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/loader/internal/loader_impl.h"

namespace ddpio::loader {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NanosSince(Clock::time_point t0) {
  return static_cast<uint64_t>((Clock::now() - t0).count());
}

}  // namespace

// ---- A worker's batch ----

absl::StatusOr<int> Loader::Impl::Assemble(uint64_t b, int worker) {
  absl::StatusOr<int> slot = AssembleBatch(b, *workers_[worker]);
  bool last;
  {
    std::lock_guard<std::mutex> lock(share_mu_);
    last = --unfinished_ == 0;
  }
  if (last) share_cv_.notify_all();  // helpers waiting for a batch to open: none will
  return slot;
}

absl::StatusOr<int> Loader::Impl::AssembleBatch(uint64_t b, Worker& w) {
  DDPIO_ASSIGN_OR_RETURN(const int s, TakeSlot());
  Slot& slot = *pool_->slots[s];
  const sampler::BatchRange range = batches_[b];
  slot.size = range.end - range.begin;
  absl::Status st;
  std::shared_ptr<const SourcedBatch> sourced;
  if (source_ != nullptr) {
    absl::StatusOr<std::shared_ptr<const SourcedBatch>> fetched = FetchSourced(b, range, w);
    if (fetched.ok()) {
      sourced = *std::move(fetched);
    } else {
      st = fetched.status();
    }
  } else if (w.txn.has_value() && options_.prefetch_records) {
    PrefetchRecords(b, range, w);
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

absl::StatusOr<std::shared_ptr<const SourcedBatch>> Loader::Impl::FetchSourced(
    uint64_t b, const sampler::BatchRange& range, Worker& w) {
  const auto t0 = Clock::now();
  auto fetched = source_->Fetch(plan_->epoch(), b, stop_);
  w.read_ns += NanosSince(t0);
  if (fetched.ok()) DDPIO_RETURN_IF_ERROR(CheckSourced(**fetched, b, range));
  return fetched;
}

void Loader::Impl::PrefetchRecords(uint64_t b, const sampler::BatchRange& range, Worker& w) {
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
  w.read_ns += NanosSince(t0);
}

absl::Status Loader::Impl::AssembleSamples(uint64_t b, const sampler::BatchRange& range, Slot& slot,
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

void Loader::Impl::AssembleClaimed(OpenBatch& open, uint64_t k, Worker& w, bool helping,
                                   std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  Notify(open, k, helping, /*done=*/false);
  absl::Status st = AssembleSample(open, k, w, helping);
  lock.lock();
  if (!st.ok()) open.Fail(k, st);
  if (sample_hook_) {
    lock.unlock();
    Notify(open, k, helping, /*done=*/true, st);
    lock.lock();
  }
}

absl::Status Loader::Impl::AssembleSample(const OpenBatch& open, uint64_t k, Worker& w,
                                          bool helping) {
  const uint64_t j = open.range.begin + k, index = plan_->IndexAt(rank_, j);
  absl::StatusOr<storage::RecordView> record;
  if (open.sourced != nullptr) {
    record = Sourced(*open.sourced, k, index);
  } else {
    const auto t0 = Clock::now();
    record = w.txn->Get(index);
    w.read_ns += NanosSince(t0);
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

// ---- One sample, through the kind ----

absl::Status Loader::Impl::FillSample(Slot& slot, uint64_t k, uint64_t index, bool padding,
                                      absl::StatusOr<storage::RecordView> record, Worker& w) {
  slot.indices[k] = index;
  slot.valid[k] = padding ? 0 : 1;
  if (!record.ok()) {
    slot.labels[k] = -1;
    return SkipOrFail(slot, k, index, record.status(), w);
  }
  slot.labels[k] = record->label;
  w.payload_bytes += record->payload.size();
  SampleNanos spent;
  absl::Status st = w.sample->Fill(*record, index, plan_->epoch(), SampleData(slot, k), &spent);
  w.decode_ns += spent.decode;
  w.augment_ns += spent.augment;
  w.collate_ns += spent.collate;
  if (!st.ok()) {
    st = Annotate(
        st, absl::StrCat("sample ", index, " (key ", storage::IndexKeyHex(index), ", source '",
                         std::string(record->source_name), "') of ", where_));
    return SkipOrFail(slot, k, index, std::move(st), w);
  }
  ++w.images;
  return absl::OkStatus();
}

absl::Status Loader::Impl::SkipOrFail(Slot& slot, uint64_t k, uint64_t index, absl::Status st,
                                      Worker& w) {
  if (options_.bad_samples == BadSamplePolicy::kFail || st.code() != absl::StatusCode::kDataLoss) {
    return st;
  }
  // Skip: a deterministic substitute (the kind's stand-in), flagged invalid, counted and listed.
  w.sample->Zero(SampleData(slot, k));
  slot.valid[k] = 0;
  ++w.bad;
  std::lock_guard<std::mutex> lock(mu_);
  if (skipped_.size() < 100) skipped_.push_back({index, std::string(st.message())});
  return absl::OkStatus();
}

absl::Span<uint8_t> Loader::Impl::SampleData(Slot& slot, uint64_t k) const {
  return absl::Span<uint8_t>(slot.data.data() + k * sample_bytes_, sample_bytes_);
}

// ---- Records from a source ----

absl::Status Loader::Impl::CheckSourced(const SourcedBatch& batch, uint64_t b,
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

absl::StatusOr<storage::RecordView> Loader::Impl::Sourced(const SourcedBatch& batch, uint64_t k,
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

// ---- The epoch's tail ----

Loader::Impl::OpenBatch* Loader::Impl::OldestClaimable() {
  OpenBatch* oldest = nullptr;
  for (OpenBatch* b : open_) {
    if (b->Claimable() && (oldest == nullptr || b->step < oldest->step)) oldest = b;
  }
  return oldest;
}

void Loader::Impl::Help(int worker) {
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

void Loader::Impl::Notify(const OpenBatch& open, uint64_t k, bool helping, bool done,
                          const absl::Status& st) const {
  if (!sample_hook_) return;
  internal::SampleEvent event;
  event.step = open.step;
  event.position = k;
  event.helping = helping;
  event.done = done;
  event.status = st;
  sample_hook_(event);
}

}  // namespace ddpio::loader
