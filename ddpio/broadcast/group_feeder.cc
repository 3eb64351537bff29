// The GroupFeeder's consumer side: creation, epochs, and this rank's batches handed out in order
// and checked. The transports and the leader's reader are in internal/.
#include "ddpio/broadcast/group_feeder.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "ddpio/broadcast/internal/decoded_batch.h"
#include "ddpio/broadcast/internal/device_link.h"
#include "ddpio/broadcast/internal/feed_context.h"
#include "ddpio/broadcast/internal/feed_leader.h"
#include "ddpio/broadcast/internal/group_agreement.h"
#include "ddpio/broadcast/internal/host_relay.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast {

using Clock = std::chrono::steady_clock;

GroupFeeder::GroupFeeder(std::unique_ptr<internal::FeedContext> ctx) : ctx_(std::move(ctx)) {}

absl::StatusOr<std::unique_ptr<GroupFeeder>> GroupFeeder::Create(
    const storage::DatasetReader* reader, const comm::GroupLayout& layout, int rank,
    std::unique_ptr<comm::Communicator> group, const FeederOptions& options) {
  if (rank < 0 || rank >= layout.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside the layout's world of ", layout.world_size()));
  }
  if (group == nullptr || group->size() != layout.group_size() ||
      group->rank() != layout.local_group_rank(rank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the group communicator does not match the layout: rank ", rank, " should be ",
                     layout.local_group_rank(rank), " of ", layout.group_size()));
  }
  const bool reads = layout.is_leader(rank) || options.readers == FeedReaders::kAll;
  if (options.read_ahead < 0)
    return absl::InvalidArgumentError("feeder read-ahead must not be negative");
  if (options.depth < 1) return absl::InvalidArgumentError("feeder depth must be at least 1");
  auto ctx = std::make_unique<internal::FeedContext>(layout, rank);
  ctx->reader = reads ? reader : nullptr;
  ctx->group = std::move(group);
  ctx->options = options;
  auto f = std::unique_ptr<GroupFeeder>(new GroupFeeder(std::move(ctx)));
  DDPIO_ASSIGN_OR_RETURN(f->dataset_size_, internal::AgreeOnGroup(*f->ctx_));
  if (reads && reader == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, layout.is_leader(rank) ? " leads its group" : " reads for itself",
        " and needs the dataset"));
  }
  DDPIO_RETURN_IF_ERROR(f->Setup());
  f->decode_threads_ = (f->loader_ != nullptr ? f->loader_->stats().workers : 0) +
                       (f->leader_ != nullptr ? f->leader_->decode_threads() : 0);
  return f;
}

absl::Status GroupFeeder::Setup() {
  internal::FeedContext& c = *ctx_;
  const FeederOptions& o = c.options;
  direct_ = c.layout.group_size() == 1 && !c.group->device_memory();
  if (c.group->device_memory()) {
    transport_ = std::make_unique<internal::DeviceLink>(c);
  } else {
    transport_ = std::make_unique<internal::HostRelay>(c);
  }
  sampler::SamplerOptions s = o.sampler;
  s.dataset_size = dataset_size_;
  s.num_replicas = c.layout.world_size();
  c.sampler_options = StreamSamplerOptions(s, o.mode, c.layout);
  DDPIO_ASSIGN_OR_RETURN(auto smp, sampler::DistributedSampler::Create(c.sampler_options));
  sampler_ = std::make_unique<sampler::DistributedSampler>(std::move(smp));
  const int upstream = transport_->Upstream();
  c.window = std::make_shared<FeedWindow>(
      c.reads_storage() ? std::string("this rank's reading thread")
      : upstream == 0   ? c.MemberName(0)
                        : absl::StrCat(c.MemberName(upstream), ", which relays the leader's data"),
      static_cast<size_t>(o.depth));
  if (o.loader.held_batches < 1)
    return absl::InvalidArgumentError("held_batches must be at least 1");
  if (o.loader.copy_to_device && o.cuda != nullptr && o.payload == FeedPayload::kDecoded) {
    return absl::InvalidArgumentError(
        "copies to the GPU need the encoded payload: decoded batches arrive ready in host buffers");
  }
  decoded_held_ = std::make_shared<loader::HoldGate>(o.loader.held_batches);
  const size_t pixels =
      static_cast<size_t>(o.loader.augment.out_width()) * o.loader.augment.out_height() * 3;
  sample_bytes_ = o.loader.seq_len > 0 ? (o.loader.seq_len + 1) * sizeof(uint32_t)
                  : o.loader.output == loader::OutputFormat::kFloatNchw ? pixels * sizeof(float)
                                                                        : pixels;
  if (direct_) {
    // A group of one in host memory has no one to send to: its loader reads the dataset itself,
    // as a plain Loader does — no feeder thread, no messages, no copy of each record.
    DDPIO_ASSIGN_OR_RETURN(
        loader_, loader::Loader::Create(c.reader, c.sampler_options, c.stream_rank(c.rank),
                                        o.loader, o.cuda));
    return absl::OkStatus();
  }
  DDPIO_RETURN_IF_ERROR(transport_->Setup(sample_bytes_));
  if (o.payload == FeedPayload::kEncoded) {
    DDPIO_ASSIGN_OR_RETURN(
        loader_, loader::Loader::Create(c.window.get(), c.sampler_options, c.stream_rank(c.rank),
                                        o.loader, o.cuda));
  }
  if (c.reads_storage()) {
    leader_ = std::make_unique<internal::FeedLeader>(c, *transport_);
    DDPIO_RETURN_IF_ERROR(leader_->Setup());
  }
  return absl::OkStatus();
}

bool GroupFeeder::is_leader() const { return ctx_->local_rank() == 0; }

bool GroupFeeder::reads_storage() const { return ctx_->reads_storage(); }

GroupFeeder::~GroupFeeder() { StopRun(); }

void GroupFeeder::StopRun() {
  if (!running_) return;
  stop_ = true;
  if (direct_) {
    loader_->Stop();
  } else if (reads_storage()) {
    ctx_->window->Drain();                   // the leader's own share is no longer wanted
    if (thread_.joinable()) thread_.join();  // it sends every peer the end of the run
    if (loader_ != nullptr) loader_->Stop();
    leader_->Stop();
  } else {
    if (loader_ != nullptr) loader_->Stop();
    ctx_->window->Drain();  // receive and discard up to the leader's end of the run
    if (thread_.joinable()) thread_.join();
  }
  held_.reset();
  running_ = false;
}

absl::Status GroupFeeder::StartEpoch(uint64_t epoch, uint64_t start) {
  if (!failed_.ok()) {
    // The run that failed ends first (its threads joined): then whether the group is whole is
    // known. A data error — a store that failed past its budget, a bad record — travelled as the
    // run's last message, so every member stands at the end of that run and a new one starts
    // clean, once the store is back or the record skipped. A group whose connections were ended
    // (a lost member, a timeout) cannot run again; a group of one never had any.
    StopRun();
    if (!direct_ && ctx_->group_aborted) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this loader's group lost its connections after an error and cannot continue: make a "
          "new loader (every rank of the job) and resume it from the last state taken "
          "(load_state_dict); the error was: ",
          failed_.message()));
    }
    DDPIO_LOG(INFO) << "loader: starting epoch " << epoch << " at sample " << start
                    << " after an earlier error (" << failed_.message() << ")";
    failed_ = absl::OkStatus();
  }
  StopRun();
  sampler_->SetEpoch(epoch);
  DDPIO_ASSIGN_OR_RETURN(sampler::EpochPlan plan, sampler_->NextPlan(start));
  plan_ = std::move(plan);
  batches_ = sampler::MakeBatches(plan_->NumSamples(ctx_->stream_rank(ctx_->rank)),
                                  ctx_->options.loader.batch_size, ctx_->options.loader.drop_last);
  delivered_ = 0;
  ctx_->window->Reset(epoch);
  if (loader_ != nullptr) DDPIO_RETURN_IF_ERROR(loader_->StartEpoch(epoch, start));
  stop_ = false;
  if (direct_) {
    // (no thread: the loader's workers read)
  } else if (reads_storage()) {
    DDPIO_RETURN_IF_ERROR(leader_->Start(*plan_, epoch, start));
    thread_ = std::thread([this, epoch] { leader_->Run(epoch, stop_); });
  } else {
    thread_ = std::thread([this] { transport_->Receive(); });
  }
  running_ = true;
  return absl::OkStatus();
}

absl::StatusOr<loader::Batch> GroupFeeder::Next() {
  held_.reset();
  DDPIO_ASSIGN_OR_RETURN(loader::HeldBatch held, NextHeld());
  held_ = std::move(held.hold);
  return held.batch;
}

bool GroupFeeder::WaitReady(std::chrono::milliseconds timeout) {
  if (!failed_.ok() || !running_) return true;
  if (loader_ == nullptr && delivered_ >= batches_.size()) return true;
  // The consumer's wait, as in NextHeld: a caller that waits here first (Python's Loader, in
  // slices) finds its batch at hand there.
  const auto t0 = Clock::now();
  const bool ready = loader_ != nullptr ? loader_->WaitReady(timeout)
                                        : ctx_->window->WaitReady(delivered_, timeout);
  loader_wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
  return ready;
}

absl::StatusOr<loader::HeldBatch> GroupFeeder::NextHeld() {
  if (!failed_.ok()) return failed_;
  if (!running_) return absl::FailedPreconditionError("Next() before StartEpoch()");
  const auto t0 = Clock::now();
  absl::StatusOr<loader::HeldBatch> batch =
      loader_ != nullptr ? loader_->NextHeld() : NextDecoded();
  loader_wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
  if (absl::IsOutOfRange(batch.status()) && thread_.joinable()) {
    // The epoch ends when the leader's thread has sent every peer its share and the end, and a
    // peer's thread has received that end: the counters are final, and a member lost on the
    // last step is reported, not missed.
    thread_.join();
    const absl::Status run = reads_storage() ? leader_->status() : ctx_->window->error();
    if (!run.ok()) batch = run;
  }
  if (batch.ok()) {
    ++delivered_;
    ++batches_total_;
    images_total_ += batch->batch.size;
  } else if (!absl::IsOutOfRange(batch.status()) && !loader::IsHeldLimit(batch.status())) {
    failed_ = batch.status();  // (too many batches held consumed nothing: the caller may retry)
  }
  return batch;
}

absl::StatusOr<loader::HeldBatch> GroupFeeder::NextDecoded() {
  const std::shared_ptr<FeedWindow>& window = ctx_->window;
  const loader::LoaderOptions& lo = ctx_->options.loader;
  if (delivered_ >= batches_.size())
    return absl::OutOfRangeError(absl::StrCat("end of epoch ", plan_->epoch()));
  // Past the held limit with HeldOverflow::kCopy (host buffers only): the batch goes out as a copy.
  const bool may_copy = lo.held_overflow == loader::LoaderOptions::HeldOverflow::kCopy &&
                        !transport_->device_memory();
  absl::Status gate = decoded_held_->Acquire(
      may_copy ? std::chrono::milliseconds(0) : lo.held_timeout, window->name());
  if (!gate.ok() && !(may_copy && loader::IsHeldLimit(gate))) return gate;
  const bool copy = !gate.ok();
  absl::StatusOr<FeedItem> taken = window->Take(delivered_, stop_);
  absl::Status st = taken.status();
  if (st.ok()) {
    st = internal::CheckDecoded(taken->header, *plan_, ctx_->stream_rank(ctx_->rank), delivered_,
                                batches_[delivered_], lo, window->name());
  }
  if (st.ok() && taken->device == nullptr) {
    st = internal::CheckDecodedPayload(taken->header, taken->payload, delivered_, window->name());
  }
  if (!st.ok()) {
    if (!copy) decoded_held_->Release();
    return st;
  }
  if (copy) {
    loader::Batch view;
    view.epoch = taken->header.epoch;
    view.step = delivered_;
    view.size = taken->header.count();
    view.data = taken->payload.data();
    view.bytes = taken->payload.size();
    view.labels = taken->header.labels.data();
    view.indices = taken->header.indices.data();
    view.valid = taken->header.valid.data();
    loader::HeldBatch copied = loader::CopyBatch(view);
    window->Recycle(std::move(taken->payload));
    ++copied_total_;
    return copied;
  }
  // The hold owns the received message; dropping it gives the buffer back to the window (while
  // the feeder lives) and the hold back to the gate.
  std::weak_ptr<FeedWindow> weak = window;
  std::shared_ptr<FeedItem> item(new FeedItem(*std::move(taken)),
                                 [weak, gate = decoded_held_](FeedItem* it) {
                                   if (auto w = weak.lock(); w != nullptr && it->device == nullptr)
                                     w->Recycle(std::move(it->payload));
                                   delete it;
                                   gate->Release();
                                 });
  loader::HeldBatch held;
  loader::Batch& b = held.batch;
  b.epoch = item->header.epoch;
  b.step = delivered_;
  b.size = item->header.count();
  if (item->device != nullptr) {  // over NCCL: on the device only
    b.data = nullptr;
    b.device_data = item->device.get();
    b.bytes = item->header.payload_bytes;
  } else {
    b.data = item->payload.data();
    b.bytes = item->payload.size();
  }
  b.labels = item->header.labels.data();
  b.indices = item->header.indices.data();
  b.valid = item->header.valid.data();
  held.hold = std::move(item);
  return held;
}

absl::StatusOr<uint64_t> GroupFeeder::BatchesInEpoch(uint64_t epoch) const {
  DDPIO_ASSIGN_OR_RETURN(sampler::EpochPlan plan, sampler_->Plan(epoch));
  return sampler::MakeBatches(plan.NumSamples(ctx_->stream_rank(ctx_->rank)),
                              ctx_->options.loader.batch_size, ctx_->options.loader.drop_last)
      .size();
}

uint64_t GroupFeeder::ResumePosition() const {
  if (!plan_.has_value()) return 0;
  return plan_->ConsumedAfter(delivered_ == 0 ? 0 : batches_[delivered_ - 1].end);
}

FeederCounters GroupFeeder::counters() const {
  const internal::FeedTraffic& t = ctx_->traffic;
  FeederCounters c;
  c.records_read = t.records_read;
  c.bytes_read = t.bytes_read;
  c.bytes_sent = t.bytes_sent;
  c.bytes_received = t.bytes_received;
  c.messages_sent = t.messages_sent;
  c.messages_received = t.messages_received;
  c.network_wait_ns = t.network_wait_ns;
  c.read_ns = t.read_ns;
  c.decode_ns = t.decode_ns;
  c.loader_wait_ns = loader_wait_ns_;
  c.batches = batches_total_;
  c.images = images_total_;
  c.batches_copied = copied_total_;
  c.decode_threads = decode_threads_;
  if (loader_ != nullptr) {
    loader::LoaderStats ls = loader_->stats();
    if (direct_) {
      c.direct = true;
      c.records_read = ls.images;
      c.bytes_read = ls.payload_bytes;
      c.read_ns = ls.read_ns;  // (a fed loader's "read" is its wait for messages: not storage)
    }
    c.decode_ns += ls.decode_ns + ls.augment_ns;
    c.batches_copied += ls.copied;
    c.bad_samples = ls.bad_samples;
    c.skipped = std::move(ls.skipped);
  }
  return c;
}

}  // namespace ddpio::broadcast
