// The GroupFeeder's setup, its consumer side and the peer's receiver. The leader's reading and
// sending thread is in group_feeder_leader.cc.
#include "ddpio/broadcast/group_feeder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ddpio/broadcast/internal/group_feeder.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast {

using Clock = std::chrono::steady_clock;

namespace {
constexpr EnumName<FeedMode> kModes[] = {{FeedMode::kShard, "shard"}, {FeedMode::kReplicate, "replicate"}};
constexpr EnumName<FeedPayload> kPayloads[] = {{FeedPayload::kEncoded, "encoded"}, {FeedPayload::kDecoded, "decoded"}};
constexpr EnumName<FeedReaders> kReaders[] = {{FeedReaders::kLeader, "leader"}, {FeedReaders::kAll, "all"}};
constexpr EnumName<FeedRelay> kRelays[] = {{FeedRelay::kChain, "chain"}, {FeedRelay::kStar, "star"}};
}  // namespace

std::string FeedModeName(FeedMode mode) { return NameOf(kModes, mode); }
absl::StatusOr<FeedMode> ParseFeedMode(std::string_view name) { return ParseName(kModes, name, "feed mode"); }
std::string FeedPayloadName(FeedPayload payload) { return NameOf(kPayloads, payload); }
absl::StatusOr<FeedPayload> ParseFeedPayload(std::string_view name) { return ParseName(kPayloads, name, "payload"); }
std::string FeedReadersName(FeedReaders readers) { return NameOf(kReaders, readers); }
absl::StatusOr<FeedReaders> ParseFeedReaders(std::string_view name) { return ParseName(kReaders, name, "readers"); }
std::string FeedRelayName(FeedRelay relay) { return NameOf(kRelays, relay); }
absl::StatusOr<FeedRelay> ParseFeedRelay(std::string_view name) { return ParseName(kRelays, name, "relay"); }

sampler::SamplerOptions StreamSamplerOptions(const sampler::SamplerOptions& world, FeedMode mode,
                                             const comm::GroupLayout& layout) {
  sampler::SamplerOptions s = world;
  s.num_replicas = mode == FeedMode::kShard ? layout.world_size() : layout.group_ws();
  return s;
}

namespace {

// Everything the members of a group must agree on, as one number (FNV-1a of a description).
uint64_t ConfigDigest(const FeederOptions& o, const comm::GroupLayout& layout) {
  const loader::LoaderOptions& l = o.loader;
  const std::string text = absl::StrCat(
      FeedModeName(o.mode), "|", FeedPayloadName(o.payload), "|", FeedReadersName(o.readers), "|",
      FeedRelayName(o.relay), "|", layout.world_size(), "|", layout.group_size(), "|",
      comm::LayoutKindName(layout.kind()), "|", o.sampler.shuffle, "|", o.sampler.seed, "|",
      sampler::PaddingName(o.sampler.padding), "|", static_cast<int>(o.sampler.permutation), "|", l.batch_size, "|",
      l.drop_last, "|", static_cast<int>(l.output), "|", l.mean[0], ",", l.mean[1], ",", l.mean[2], "|", l.stddev[0],
      ",", l.stddev[1], ",", l.stddev[2], "|", l.augment.size, "|", l.augment.train, "|", l.augment.scale_min, "|",
      l.augment.scale_max, "|", l.augment.ratio_min, "|", l.augment.ratio_max, "|", l.augment.flip_probability, "|",
      l.augment.resize_size, "|", l.seed, "|", loader::DecodeModeName(l.decode), "|", static_cast<int>(l.bad_samples));
  return Fnv1a64(text);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GroupFeeder>> GroupFeeder::Create(const storage::DatasetReader* reader,
                                                                 const comm::GroupLayout& layout, int rank,
                                                                 std::unique_ptr<comm::Communicator> group,
                                                                 const FeederOptions& options) {
  if (rank < 0 || rank >= layout.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside the layout's world of ",
                                                   layout.world_size()));
  }
  if (group == nullptr || group->size() != layout.group_size() || group->rank() != layout.local_group_rank(rank)) {
    return absl::InvalidArgumentError(absl::StrCat("the group communicator does not match the layout: rank ", rank,
                                                   " should be ", layout.local_group_rank(rank), " of ",
                                                   layout.group_size()));
  }
  const bool reads = layout.is_leader(rank) || options.readers == FeedReaders::kAll;
  if (reads && reader == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank,
                                                   layout.is_leader(rank) ? " leads its group" : " reads for itself",
                                                   " and needs the dataset"));
  }
  if (options.read_ahead < 0) return absl::InvalidArgumentError("feeder read-ahead must not be negative");
  if (options.depth < 1) return absl::InvalidArgumentError("feeder depth must be at least 1");
  auto f = std::unique_ptr<GroupFeeder>(new GroupFeeder());
  f->reader_ = reads ? reader : nullptr;
  f->layout_ = layout;
  f->rank_ = rank;
  f->local_rank_ = layout.local_group_rank(rank);
  f->group_ = std::move(group);
  f->options_ = options;
  DDPIO_RETURN_IF_ERROR(f->Setup());
  return f;
}

int GroupFeeder::stream_rank(int member_rank) const {
  return options_.mode == FeedMode::kShard ? member_rank : layout_->group_rank(member_rank);
}

absl::Status GroupFeeder::Setup() {
  // Agree on the dataset size and the settings: each rank contributes (size, digest).
  // (In the group communicator's memory: the device's over NCCL.)
  uint64_t mine[2] = {reader_ != nullptr ? reader_->size() : 0, ConfigDigest(options_, *layout_)};
  std::vector<uint64_t> all(2 * layout_->group_size());
  DDPIO_RETURN_IF_ERROR(Annotate(AllGatherHost(*group_, mine, all.data(), sizeof(mine), options_.timeout),
                                 "agreeing on the group feeder's settings"));
  for (int m = 1; m < layout_->group_size(); ++m) {
    if (all[2 * m + 1] != all[1]) {
      return absl::InvalidArgumentError(absl::StrCat("the feeder settings of group member ", m, " (rank ",
                                                     layout_->members(rank_)[m],
                                                     ") differ from the leader's: every member must use the same "
                                                     "mode, payload, sampler and loader settings"));
    }
  }
  dataset_size_ = all[0];
  device_ = group_->device_memory();
  sampler::SamplerOptions s = options_.sampler;
  s.dataset_size = dataset_size_;
  s.num_replicas = layout_->world_size();
  sampler_options_ = StreamSamplerOptions(s, options_.mode, *layout_);
  DDPIO_ASSIGN_OR_RETURN(auto smp, sampler::DistributedSampler::Create(sampler_options_));
  sampler_ = std::make_unique<sampler::DistributedSampler>(std::move(smp));
  const int from = layout_->members(rank_)[reads_storage() ? 0 : upstream()];
  window_ = std::make_shared<FeedWindow>(
      reads_storage() ? std::string("this rank's reading thread")
      : upstream() == 0 ? absl::StrCat("the group leader (rank ", from, ")")
                        : absl::StrCat("group member ", upstream(), " (rank ", from, "), which relays the leader's data"),
      static_cast<size_t>(options_.depth));
  if (options_.loader.held_batches < 1) return absl::InvalidArgumentError("held_batches must be at least 1");
  if (options_.loader.copy_to_device && options_.cuda != nullptr && options_.payload == FeedPayload::kDecoded) {
    return absl::InvalidArgumentError(
        "copies to the GPU need the encoded payload: decoded batches arrive ready in host buffers");
  }
  decoded_held_ = std::make_shared<loader::HoldGate>(options_.loader.held_batches);
  const size_t pixels = static_cast<size_t>(options_.loader.augment.size) * options_.loader.augment.size * 3;
  sample_bytes_ = options_.loader.output == loader::OutputFormat::kFloatNchw ? pixels * sizeof(float) : pixels;
  if (device_) DDPIO_RETURN_IF_ERROR(SetupDevice());
  if (options_.payload == FeedPayload::kEncoded) {
    DDPIO_ASSIGN_OR_RETURN(loader_, loader::Loader::Create(window_.get(), sampler_options_, stream_rank(rank_),
                                                           options_.loader, options_.cuda));
  }
  if (reads_storage()) DDPIO_RETURN_IF_ERROR(SetupLeader());
  return absl::OkStatus();
}

std::vector<int> GroupFeeder::LeaderTargets() const {
  std::vector<int> to;
  if (options_.readers == FeedReaders::kAll) return to;
  const int g = layout_->group_size();
  for (int i = 1; i < (chain() ? std::min(g, 2) : g); ++i) to.push_back(i);
  return to;
}

int GroupFeeder::upstream() const { return chain() ? local_rank_ - 1 : 0; }

int GroupFeeder::downstream() const {
  return chain() && local_rank_ + 1 < layout_->group_size() ? local_rank_ + 1 : -1;
}

GroupFeeder::~GroupFeeder() { StopRun(); }

void GroupFeeder::StopRun() {
  if (!running_) return;
  stop_ = true;
  if (reads_storage()) {
    window_->Drain();  // the leader's own share is no longer wanted
    if (thread_.joinable()) thread_.join();  // it sends every peer the end of the run
    if (loader_ != nullptr) loader_->Stop();
    for (auto& m : members_) {
      if (m->loader != nullptr) m->loader->Stop();
    }
  } else {
    if (loader_ != nullptr) loader_->Stop();
    window_->Drain();  // receive and discard up to the leader's end of the run
    if (thread_.joinable()) thread_.join();
  }
  held_.reset();
  running_ = false;
}

absl::Status GroupFeeder::StartEpoch(uint64_t epoch, uint64_t start) {
  if (!failed_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the group feeder failed earlier: ", failed_.message()));
  }
  StopRun();
  sampler_->SetEpoch(epoch);
  DDPIO_ASSIGN_OR_RETURN(sampler::EpochPlan plan, sampler_->NextPlan(start));
  plan_ = std::move(plan);
  batches_ = sampler::MakeBatches(plan_->NumSamples(stream_rank(rank_)), options_.loader.batch_size,
                                  options_.loader.drop_last);
  delivered_ = 0;
  window_->Reset(epoch);
  if (loader_ != nullptr) DDPIO_RETURN_IF_ERROR(loader_->StartEpoch(epoch, start));
  stop_ = false;
  if (reads_storage()) {
    DDPIO_RETURN_IF_ERROR(StartLeaderRun(epoch, start));
    thread_ = std::thread([this, epoch] { LeaderRun(epoch); });
  } else {
    thread_ = std::thread([this] { PeerRun(); });
  }
  running_ = true;
  return absl::OkStatus();
}

void GroupFeeder::PeerRun() {
  if (device_) return PeerRunDevice();
  const int from = upstream(), to = downstream();
  const std::string source = absl::StrCat(from == 0 ? "the group leader" : absl::StrCat("group member ", from),
                                          " (rank ", layout_->members(rank_)[from], ")");
  for (;;) {
    FeedItem item;
    item.payload = window_->SpareBuffer();
    uint64_t wire = 0;
    const auto t0 = Clock::now();
    // In a chain every message goes on to the next member while it arrives, ends and errors too.
    absl::StatusOr<FeedHeader> h =
        to < 0 ? RecvFeedMessage(*group_, from, &item.payload, options_.limits, options_.timeout, &wire)
               : RelayFeedMessage(*group_, from, to, &item.payload, options_.limits, options_.timeout, &wire);
    network_wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
    if (!h.ok()) {
      window_->SetError(Annotate(h.status(), to < 0 ? absl::StrCat("receiving from ", source)
                                                     : absl::StrCat("relaying from ", source, " to group member ", to,
                                                                    " (rank ", layout_->members(rank_)[to], ")")));
      group_->Abort();  // the rest of the group learns at once
      return;
    }
    ++messages_received_;
    bytes_received_ += wire;
    if (to >= 0) {
      ++messages_sent_;
      bytes_sent_ += wire;
    }
    if (h->error) {
      window_->SetError(DecodeFeedError(item.payload, layout_->leader(rank_)));
      return;
    }
    if (h->end_of_epoch) {
      window_->End();
      return;
    }
    item.header = *std::move(h);
    window_->Push(std::move(item));
  }
}

absl::StatusOr<loader::Batch> GroupFeeder::Next() {
  held_.reset();
  DDPIO_ASSIGN_OR_RETURN(loader::HeldBatch held, NextHeld());
  held_ = std::move(held.hold);
  return held.batch;
}

absl::StatusOr<loader::HeldBatch> GroupFeeder::NextHeld() {
  if (!failed_.ok()) return failed_;
  if (!running_) return absl::FailedPreconditionError("Next() before StartEpoch()");
  const auto t0 = Clock::now();
  absl::StatusOr<loader::HeldBatch> batch = loader_ != nullptr ? loader_->NextHeld() : NextDecoded();
  loader_wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
  if (absl::IsOutOfRange(batch.status()) && thread_.joinable()) {
    // The epoch ends when the leader's thread has sent every peer its share and the end, and a
    // peer's thread has received that end: the counters are final, and a member lost on the
    // last step is reported, not missed.
    thread_.join();
    const absl::Status run = reads_storage() ? run_status_ : window_->error();
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
  if (delivered_ >= batches_.size()) return absl::OutOfRangeError(absl::StrCat("end of epoch ", plan_->epoch()));
  DDPIO_RETURN_IF_ERROR(decoded_held_->Acquire(options_.loader.held_timeout, window_->name()));
  absl::StatusOr<FeedItem> taken = window_->Take(delivered_, stop_);
  absl::Status st = taken.status();
  if (st.ok()) {
    st = internal::CheckDecoded(taken->header, *plan_, stream_rank(rank_), delivered_, batches_[delivered_],
                                options_.loader, window_->name());
  }
  if (!st.ok()) {
    decoded_held_->Release();
    return st;
  }
  // The hold owns the received message; dropping it gives the buffer back to the window (while
  // the feeder lives) and the hold back to the gate.
  std::weak_ptr<FeedWindow> window = window_;
  std::shared_ptr<FeedItem> item(new FeedItem(*std::move(taken)), [window, gate = decoded_held_](FeedItem* it) {
    if (auto w = window.lock(); w != nullptr && it->device == nullptr) w->Recycle(std::move(it->payload));
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
  return sampler::MakeBatches(plan.NumSamples(stream_rank(rank_)), options_.loader.batch_size,
                              options_.loader.drop_last)
      .size();
}

uint64_t GroupFeeder::ResumePosition() const {
  if (!plan_.has_value()) return 0;
  return plan_->ConsumedAfter(delivered_ == 0 ? 0 : batches_[delivered_ - 1].end);
}

FeederCounters GroupFeeder::counters() const {
  FeederCounters c;
  c.records_read = records_read_;
  c.bytes_read = bytes_read_;
  c.bytes_sent = bytes_sent_;
  c.bytes_received = bytes_received_;
  c.messages_sent = messages_sent_;
  c.messages_received = messages_received_;
  c.network_wait_ns = network_wait_ns_;
  c.loader_wait_ns = loader_wait_ns_;
  c.batches = batches_total_;
  c.images = images_total_;
  if (loader_ != nullptr) {
    loader::LoaderStats ls = loader_->stats();
    c.bad_samples = ls.bad_samples;
    c.skipped = std::move(ls.skipped);
  }
  return c;
}

}  // namespace ddpio::broadcast
