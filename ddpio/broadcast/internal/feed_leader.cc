#include "ddpio/broadcast/internal/feed_leader.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "ddpio/broadcast/internal/decoded_batch.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast::internal {

absl::Status FeedLeader::Setup() {
  const FeederOptions& o = ctx_.options;
  const std::vector<int>& members = ctx_.layout.members(ctx_.rank);
  if (o.readers == FeedReaders::kAll) {  // this rank reads its own stream, for itself only
    auto m = std::make_unique<Member>();
    m->to = {0};
    m->stream = ctx_.stream_rank(ctx_.rank);
    members_.push_back(std::move(m));
  } else if (o.mode == FeedMode::kShard) {
    // The peers first, the leader's own share last: peers get each step as early as possible,
    // and when the leader has its last batch every peer has been sent its own.
    for (size_t n = 1; n <= members.size(); ++n) {
      const size_t i = n % members.size();
      auto m = std::make_unique<Member>();
      m->to = {static_cast<int>(i)};
      m->stream = ctx_.stream_rank(members[i]);
      members_.push_back(std::move(m));
    }
  } else {
    auto m = std::make_unique<Member>();
    m->to = transport_.Peers();  // chain: member 1 only, which relays; star: every member
    m->to.push_back(0);
    m->stream = ctx_.stream_rank(ctx_.rank);
    members_.push_back(std::move(m));
  }
  if (o.payload == FeedPayload::kDecoded) {
    loader::LoaderOptions lo = o.loader;
    lo.copy_to_device = false;  // these batches are sent, not trained on here
    // Over NCCL they are staged on the device: decoded into page-locked memory (when given a
    // CUDA runtime), each copy is an asynchronous DMA rather than a driver-staged copy.
    device::CudaRuntime* pinned = transport_.device_memory() ? o.cuda : nullptr;
    for (auto& m : members_) {
      DDPIO_ASSIGN_OR_RETURN(m->loader, loader::Loader::Create(ctx_.reader, ctx_.sampler_options,
                                                               m->stream, lo, pinned));
    }
  }
  return absl::OkStatus();
}

int FeedLeader::decode_threads() const {
  int threads = 0;
  for (const auto& m : members_) {
    if (m->loader != nullptr) threads += m->loader->stats().workers;
  }
  return threads;
}

absl::Status FeedLeader::Start(const sampler::EpochPlan& plan, uint64_t epoch, uint64_t start) {
  plan_ = &plan;
  steps_ = 0;
  for (auto& m : members_) {
    m->batches = sampler::MakeBatches(plan.NumSamples(m->stream), ctx_.options.loader.batch_size,
                                      ctx_.options.loader.drop_last);
    m->done = false;
    steps_ = std::max<uint64_t>(steps_, m->batches.size());
    if (m->loader != nullptr) DDPIO_RETURN_IF_ERROR(m->loader->StartEpoch(epoch, start));
  }
  return absl::OkStatus();
}

void FeedLeader::Stop() {
  for (auto& m : members_) {
    if (m->loader != nullptr) m->loader->Stop();
  }
}

void FeedLeader::Run(uint64_t epoch, const std::atomic<bool>& stop) {
  absl::Status st;
  transport_.ResetBroken();
  if (ctx_.options.payload == FeedPayload::kEncoded) {
    absl::StatusOr<storage::ReadTxn> txn = ctx_.reader->BeginRead();
    st = txn.status();
    ahead_.clear();
    ahead_step_ = hinted_ = copied_ = 0;
    for (uint64_t step = 0; st.ok() && step < steps_ && !stop; ++step) {
      st = transport_.EndStep(step, SendEncodedStep(epoch, step, *txn));
    }
  } else {
    bool more = true;
    for (uint64_t step = 0; st.ok() && more && !stop; ++step)
      st = SendDecodedStep(epoch, step, &more);
  }
  Finish(epoch, st);
}

void FeedLeader::Finish(uint64_t epoch, absl::Status st) {
  run_status_ = st;
  if (st.ok()) {  // the run is complete or was stopped: every peer gets its end
    FeedHeader end;
    end.end_of_epoch = true;
    end.epoch = epoch;
    st = transport_.SendLast(end, nullptr);
    if (st.ok()) {
      ctx_.window->End();
      return;
    }
    run_status_ = st;
  }
  ctx_.window->SetError(st);
  if (!transport_.broken()) {
    // A data error (e.g. a corrupt record under `fail`): every peer gets it as it is.
    const std::string text = EncodeFeedError(st);
    const FeedHeader h = FeedErrorHeader(epoch, 0, text);
    if (transport_.SendLast(h, reinterpret_cast<const uint8_t*>(text.data())).ok()) return;
  }
  ctx_.AbortGroup();  // peers blocked on this leader fail at once instead of at their timeout
}

void FeedLeader::ReadAhead(storage::ReadTxn& txn) {
  const uint64_t window = static_cast<uint64_t>(ctx_.options.read_ahead);
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

absl::Status FeedLeader::SendEncodedStep(uint64_t epoch, uint64_t step, storage::ReadTxn& txn) {
  FeedTraffic& traffic = ctx_.traffic;
  for (auto& m : members_) {
    if (step >= m->batches.size()) continue;  // uneven streams (padding none): this one has ended
    const sampler::BatchRange range = m->batches[step];
    FeedHeader h;
    h.epoch = epoch;
    h.step = step;
    std::vector<uint8_t> payload = ctx_.window->SpareBuffer();
    payload.clear();
    for (uint64_t j = range.begin; j < range.end; ++j) {
      const uint64_t index = plan_->IndexAt(m->stream, j);
      h.indices.push_back(index);
      h.valid.push_back(plan_->IsPadding(m->stream, j) ? 0 : 1);
      ReadAhead(txn);
      ++copied_;
      absl::Span<const uint8_t> stored;
      storage::RecordBinding binding;
      const auto read_start = std::chrono::steady_clock::now();
      absl::StatusOr<storage::RecordView> record = txn.Get(index, &stored, &binding);
      if (!record.ok()) {
        // A bus error in the map ends the run whatever the policy: every later read fails too.
        const bool map_lost = !txn.CheckMapped().ok();
        txn.Reset();
        if (map_lost || !absl::IsDataLoss(record.status()) ||
            ctx_.options.loader.bad_samples == loader::BadSamplePolicy::kFail) {
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
      ++traffic.records_read;
      traffic.bytes_read += stored.size();
      h.labels.push_back(record->label);
      h.sizes.push_back(stored.size());
      h.salts.push_back(binding.salt);
      h.keys.push_back(binding.key);
      payload.insert(payload.end(), stored.begin(), stored.end());
      traffic.read_ns += static_cast<uint64_t>(
          (std::chrono::steady_clock::now() - read_start).count());  // the read and its copy
      // The copy read the map again: a page lost since Get (the file cut short under the job)
      // read as zeros, which must not be sent as the record.
      if (absl::Status mapped = txn.CheckMapped(); !mapped.ok()) {
        txn.Reset();
        return Annotate(
            mapped, absl::StrCat("record ", index, " (key ", storage::IndexKeyHex(index), ") of ",
                                 ctx_.reader->path()));
      }
    }
    txn.Reset();  // do not pin old pages between steps
    h.payload_bytes = payload.size();
    const uint8_t* data = payload.data();
    DDPIO_RETURN_IF_ERROR(transport_.Send(m->to, std::move(h), data, &payload));
  }
  return absl::OkStatus();
}

absl::Status FeedLeader::ForEachDecodedBatch(
    uint64_t epoch, uint64_t step, bool* more,
    const std::function<absl::Status(Member&, const loader::Batch&, FeedHeader)>& fn) {
  *more = false;
  uint64_t read = 0, bytes = 0, read_ns = 0, decode_ns = 0;
  for (auto& m : members_) {
    if (!m->done) {
      absl::StatusOr<loader::Batch> b = m->loader->Next();
      if (absl::IsOutOfRange(b.status())) {
        m->done = true;
      } else {
        DDPIO_RETURN_IF_ERROR(b.status());
        *more = true;
        FeedHeader h = DecodedHeader(*b, ctx_.options.loader);
        h.epoch = epoch;
        h.step = step;
        DDPIO_RETURN_IF_ERROR(fn(*m, *b, std::move(h)));
      }
    }
    const loader::LoaderStats s = m->loader->stats();
    read += s.images + s.bad_samples;
    bytes += s.payload_bytes;
    read_ns += s.read_ns;
    decode_ns += s.decode_ns + s.augment_ns;
  }
  ctx_.traffic.records_read = read;
  ctx_.traffic.bytes_read = bytes;
  ctx_.traffic.read_ns = read_ns;
  ctx_.traffic.decode_ns = decode_ns;
  return absl::OkStatus();
}

absl::Status FeedLeader::SendDecodedStep(uint64_t epoch, uint64_t step, bool* more) {
  absl::Status st =
      ForEachDecodedBatch(epoch, step, more, [&](Member& m, const loader::Batch& b, FeedHeader h) {
        return transport_.Send(m.to, std::move(h), b.data, nullptr);
      });
  // What was staged goes now (over NCCL: one transfer of every stream's batch), or is dropped.
  return transport_.EndStep(step, st);
}

}  // namespace ddpio::broadcast::internal
