// The GroupFeeder's leader: one thread reads the group's records (encoded) or takes the member
// loaders' decoded batches, and sends each member its share, step by step, at most `depth`
// messages ahead of the slowest member. Its own share goes to its own window like a peer's.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ddpio/broadcast/group_feeder.h"
#include "ddpio/broadcast/internal/group_feeder.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/checksum.h"

namespace ddpio::broadcast {

using Clock = std::chrono::steady_clock;

absl::Status GroupFeeder::SetupLeader() {
  const std::vector<int>& members = layout_->members(rank_);
  if (options_.readers == FeedReaders::kAll) {  // this rank reads its own stream, for itself only
    auto m = std::make_unique<Member>();
    m->to = {0};
    m->stream = stream_rank(rank_);
    members_.push_back(std::move(m));
  } else if (options_.mode == FeedMode::kShard) {
    // The peers first, the leader's own share last: peers get each step as early as possible,
    // and when the leader has its last batch every peer has been sent its own.
    for (size_t n = 1; n <= members.size(); ++n) {
      const size_t i = n % members.size();
      auto m = std::make_unique<Member>();
      m->to = {static_cast<int>(i)};
      m->stream = stream_rank(members[i]);
      members_.push_back(std::move(m));
    }
  } else {
    auto m = std::make_unique<Member>();
    m->to = LeaderTargets();  // chain: member 1 only, which relays; star: every member
    m->to.push_back(0);
    m->stream = stream_rank(rank_);
    members_.push_back(std::move(m));
  }
  if (options_.payload == FeedPayload::kDecoded) {
    loader::LoaderOptions lo = options_.loader;
    lo.copy_to_device = false;  // these batches are sent, not trained on here
    // Over NCCL they are staged on the device: decoded into page-locked memory (when given a
    // CUDA runtime), each copy is an asynchronous DMA rather than a driver-staged copy.
    loader::CudaRuntime* pinned = device_ ? options_.cuda : nullptr;
    for (auto& m : members_) {
      DDPIO_ASSIGN_OR_RETURN(m->loader, loader::Loader::Create(reader_, sampler_options_, m->stream, lo, pinned));
    }
  }
  return absl::OkStatus();
}

absl::Status GroupFeeder::StartLeaderRun(uint64_t epoch, uint64_t start) {
  steps_ = 0;
  for (auto& m : members_) {
    m->batches = sampler::MakeBatches(plan_->NumSamples(m->stream), options_.loader.batch_size,
                                      options_.loader.drop_last);
    m->done = false;
    steps_ = std::max<uint64_t>(steps_, m->batches.size());
    if (m->loader != nullptr) DDPIO_RETURN_IF_ERROR(m->loader->StartEpoch(epoch, start));
  }
  return absl::OkStatus();
}

void GroupFeeder::LeaderRun(uint64_t epoch) {
  absl::Status st;
  comm_broken_ = false;
  if (options_.payload == FeedPayload::kEncoded) {
    absl::StatusOr<storage::ReadTxn> txn = reader_->BeginRead();
    st = txn.status();
    ahead_.clear();
    ahead_step_ = hinted_ = copied_ = 0;
    for (uint64_t step = 0; st.ok() && step < steps_ && !stop_; ++step) st = SendEncodedStep(epoch, step, *txn);
  } else {
    bool more = true;
    for (uint64_t step = 0; st.ok() && more && !stop_; ++step) st = SendDecodedStep(epoch, step, &more);
  }
  FinishLeaderRun(epoch, st);
}

void GroupFeeder::FinishLeaderRun(uint64_t epoch, absl::Status st) {
  run_status_ = st;
  if (st.ok()) {  // the run is complete or was stopped: every peer gets its end
    FeedHeader end;
    end.end_of_epoch = true;
    end.epoch = epoch;
    st = device_ ? DeliverDevice(end, nullptr) : Deliver(LeaderTargets(), end, nullptr, nullptr);
    if (st.ok()) {
      window_->End();
      return;
    }
    run_status_ = st;
  }
  window_->SetError(st);
  if (!comm_broken_) {
    // A data error (e.g. a corrupt record under `fail`): every peer gets it as it is.
    const std::string text = EncodeFeedError(st);
    const FeedHeader h = FeedErrorHeader(epoch, 0, text);
    const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
    if ((device_ ? DeliverDevice(h, bytes) : Deliver(LeaderTargets(), h, bytes, nullptr)).ok()) return;
  }
  group_->Abort();  // peers blocked on this leader fail at once instead of at their timeout
}

absl::Status GroupFeeder::Deliver(const std::vector<int>& to, const FeedHeader& h, const uint8_t* data,
                                  std::vector<uint8_t>* owned) {
  bool local = false;
  for (int peer : to) {
    if (peer == 0) {
      local = true;
      continue;
    }
    uint64_t wire = 0;
    const auto t0 = Clock::now();
    absl::Status st = SendFeedMessage(*group_, peer, h, data, options_.timeout, &wire);
    network_wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
    if (!st.ok()) {
      comm_broken_ = true;
      return Annotate(st, absl::StrCat("sending to group member ", peer, " (rank ", layout_->members(rank_)[peer], ")"));
    }
    ++messages_sent_;
    bytes_sent_ += wire;
  }
  if (!local) {
    if (owned != nullptr) window_->Recycle(std::move(*owned));
    return absl::OkStatus();
  }
  FeedItem item;
  item.header = h;
  if (owned != nullptr) {
    item.payload = std::move(*owned);
  } else {
    item.payload = window_->SpareBuffer();
    item.payload.assign(data, data + h.payload_bytes);
  }
  window_->Push(std::move(item));
  return absl::OkStatus();
}

void GroupFeeder::ReadAhead(storage::ReadTxn& txn) {
  const uint64_t window = static_cast<uint64_t>(options_.read_ahead);
  if (window == 0 || hinted_ >= copied_ + window) return;
  // Hint in bursts of half a window, not a record at a time: fewer calls, merged ranges.
  const uint64_t target = copied_ + window + window / 2;
  std::vector<uint64_t> burst;
  while (hinted_ + burst.size() < target) {
    if (ahead_.empty()) {
      if (ahead_step_ >= steps_) break;
      for (const auto& m : members_) {  // the order SendEncodedStep copies them in
        if (ahead_step_ >= m->batches.size()) continue;
        const sampler::BatchRange r = m->batches[ahead_step_];
        for (uint64_t j = r.begin; j < r.end; ++j) ahead_.push_back(plan_->IndexAt(m->stream, j));
      }
      ++ahead_step_;
      continue;
    }
    burst.push_back(ahead_.front());
    ahead_.pop_front();
  }
  hinted_ += burst.size();
  (void)txn.Prefetch(burst);  // advice only: Get reports a bad record itself
}

absl::Status GroupFeeder::SendEncodedStep(uint64_t epoch, uint64_t step, storage::ReadTxn& txn) {
  for (auto& m : members_) {
    if (step >= m->batches.size()) continue;  // uneven streams (padding none): this one has ended
    const sampler::BatchRange range = m->batches[step];
    FeedHeader h;
    h.epoch = epoch;
    h.step = step;
    std::vector<uint8_t> payload = window_->SpareBuffer();
    payload.clear();
    for (uint64_t j = range.begin; j < range.end; ++j) {
      const uint64_t index = plan_->IndexAt(m->stream, j);
      h.indices.push_back(index);
      h.valid.push_back(plan_->IsPadding(m->stream, j) ? 0 : 1);
      ReadAhead(txn);
      ++copied_;
      absl::Span<const uint8_t> stored;
      storage::RecordBinding binding;
      absl::StatusOr<storage::RecordView> record = txn.Get(index, &stored, &binding);
      if (!record.ok()) {
        // A bus error in the map ends the run whatever the policy: every later read fails too.
        const bool map_lost = !txn.CheckMapped().ok();
        txn.Reset();
        if (map_lost || !absl::IsDataLoss(record.status()) ||
            options_.loader.bad_samples == loader::BadSamplePolicy::kFail) {
          return record.status();
        }
        // skip: an empty record; the member's loader substitutes it and flags it invalid.
        DDPIO_LOG(WARNING) << "group feeder: skipping " << record.status().message();
        h.labels.push_back(-1);
        h.sizes.push_back(0);
        h.salts.push_back(0);
        h.keys.push_back(0);
        h.valid.back() = 0;
        continue;
      }
      ++records_read_;
      bytes_read_ += stored.size();
      h.labels.push_back(record->label);
      h.sizes.push_back(stored.size());
      h.salts.push_back(binding.salt);
      h.keys.push_back(binding.key);
      payload.insert(payload.end(), stored.begin(), stored.end());
      // The copy read the map again: a page lost since Get (the file cut short under the job)
      // read as zeros, which must not be sent as the record.
      if (absl::Status mapped = txn.CheckMapped(); !mapped.ok()) {
        txn.Reset();
        return Annotate(mapped, absl::StrCat("record ", index, " (key ", storage::IndexKeyHex(index), ") of ",
                                             reader_->path()));
      }
    }
    txn.Reset();  // do not pin old pages between steps
    h.payload_bytes = payload.size();
    DDPIO_RETURN_IF_ERROR(Deliver(m->to, h, payload.data(), &payload));
  }
  return absl::OkStatus();
}

absl::Status GroupFeeder::ForEachDecodedBatch(
    uint64_t epoch, uint64_t step, bool* more,
    const std::function<absl::Status(Member&, const loader::Batch&, FeedHeader)>& fn) {
  *more = false;
  uint64_t read = 0, bytes = 0;
  for (auto& m : members_) {
    if (!m->done) {
      absl::StatusOr<loader::Batch> b = m->loader->Next();
      if (absl::IsOutOfRange(b.status())) {
        m->done = true;
      } else {
        DDPIO_RETURN_IF_ERROR(b.status());
        *more = true;
        FeedHeader h = internal::DecodedHeader(*b, options_.loader);
        h.epoch = epoch;
        h.step = step;
        DDPIO_RETURN_IF_ERROR(fn(*m, *b, std::move(h)));
      }
    }
    const loader::LoaderStats s = m->loader->stats();
    read += s.images + s.bad_samples;
    bytes += s.payload_bytes;
  }
  records_read_ = read;
  bytes_read_ = bytes;
  return absl::OkStatus();
}

absl::Status GroupFeeder::SendDecodedStep(uint64_t epoch, uint64_t step, bool* more) {
  if (device_) return SendDecodedStepDevice(epoch, step, more);
  return ForEachDecodedBatch(epoch, step, more, [&](Member& m, const loader::Batch& b, FeedHeader h) {
    return Deliver(m.to, h, b.data, nullptr);
  });
}

namespace internal {

FeedHeader DecodedHeader(const loader::Batch& batch, const loader::LoaderOptions& options) {
  FeedHeader h;
  h.payload = PayloadKind::kDecoded;
  const uint64_t w = static_cast<uint64_t>(options.augment.out_width());
  const uint64_t ht = static_cast<uint64_t>(options.augment.out_height());
  if (options.output == loader::OutputFormat::kUint8Nhwc) {
    h.dtype = DType::kUint8;
    h.sample_shape = {ht, w, 3};
  } else {
    h.dtype = DType::kFloat32;
    h.sample_shape = {3, ht, w};
  }
  h.indices.assign(batch.indices, batch.indices + batch.size);
  h.labels.assign(batch.labels, batch.labels + batch.size);
  h.valid.assign(batch.valid, batch.valid + batch.size);
  h.payload_bytes = batch.bytes;
  if (batch.data != nullptr) {  // decoded in host memory: checked on receipt
    h.has_crc = true;
    h.payload_crc = storage::Crc32c(batch.data, batch.bytes);
  }
  return h;
}

absl::Status CheckDecoded(const FeedHeader& h, const sampler::EpochPlan& plan, int stream_rank, uint64_t step,
                          const sampler::BatchRange& range, const loader::LoaderOptions& options,
                          const std::string& from) {
  loader::Batch shape_of;
  const FeedHeader want = DecodedHeader(shape_of, options);
  const uint64_t n = range.end - range.begin;
  if (h.payload != PayloadKind::kDecoded || h.dtype != want.dtype || h.sample_shape != want.sample_shape) {
    return absl::DataLossError(absl::StrCat("batch ", step, " from ", from,
                                            " is not a decoded batch of this rank's output shape and type"));
  }
  if (h.epoch != plan.epoch() || h.step != step || h.count() != n) {
    return absl::DataLossError(absl::StrCat("out of step with ", from, ": expected epoch ", plan.epoch(), " batch ",
                                            step, " of ", n, " samples, got epoch ", h.epoch, " batch ", h.step,
                                            " of ", h.count()));
  }
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t expected = plan.IndexAt(stream_rank, range.begin + k);
    if (h.indices[k] != expected) {
      return absl::DataLossError(absl::StrCat("out of step with ", from, ": batch ", step, " position ", k,
                                              " holds sample ", h.indices[k], ", this rank's sampler expects ",
                                              expected));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ddpio::broadcast
