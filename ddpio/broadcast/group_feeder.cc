// The GroupFeeder's setup, its consumer side and the peer's receiver. The leader's reading and
// sending thread is in group_feeder_leader.cc.
#include "ddpio/broadcast/group_feeder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ddpio/broadcast/internal/group_feeder.h"
#include "ddpio/common/enum_names.h"
#include "ddpio/common/hash.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"
#include "ddpio/storage/checksum.h"

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

// Everything the members of a group must agree on, by name, in a fixed order.
std::vector<std::pair<std::string, std::string>> FeederSettings(const FeederOptions& o,
                                                                const comm::GroupLayout& layout) {
  const loader::LoaderOptions& l = o.loader;
  const loader::AugmentOptions& a = l.augment;
  auto triple = [](const std::array<float, 3>& v) { return absl::StrCat(v[0], ",", v[1], ",", v[2]); };
  return {
      {"mode", FeedModeName(o.mode)},
      {"payload", FeedPayloadName(o.payload)},
      {"readers", FeedReadersName(o.readers)},
      {"relay", FeedRelayName(o.relay)},
      {"world_size", absl::StrCat(layout.world_size())},
      {"group_size", absl::StrCat(layout.group_size())},
      {"layout", comm::LayoutKindName(layout.kind())},
      {"shuffle", absl::StrCat(o.sampler.shuffle)},
      {"seed", absl::StrCat(o.sampler.seed)},
      {"padding", sampler::PaddingName(o.sampler.padding)},
      {"permutation", sampler::PermutationKindName(o.sampler.permutation)},
      {"batch_size", absl::StrCat(l.batch_size)},
      {"drop_last", absl::StrCat(l.drop_last)},
      {"output", absl::StrCat(static_cast<int>(l.output))},
      {"mean", triple(l.mean)},
      {"std", triple(l.stddev)},
      {"image_size", absl::StrCat(a.out_height(), "x", a.out_width())},
      {"train", absl::StrCat(a.train)},
      {"scale", absl::StrCat(a.scale_min, ",", a.scale_max)},
      {"ratio", absl::StrCat(a.ratio_min, ",", a.ratio_max)},
      {"flip", absl::StrCat(a.flip_probability)},
      {"resize_size", absl::StrCat(a.resize_size)},
      {"augment_seed", absl::StrCat(l.seed)},
      {"decode", loader::DecodeModeName(l.decode)},
      {"bad_samples", absl::StrCat(static_cast<int>(l.bad_samples))},
  };
}

// One member's side of the agreement: its settings, its dataset (identity or why it could not be
// opened) and the path it named, as lines "name=value" (values C-escaped).
std::string DescribeMember(const FeederOptions& o, const comm::GroupLayout& layout) {
  std::string text = absl::StrCat("dataset_path=", absl::CEscape(o.dataset.path), "\n");
  absl::StrAppend(&text, "dataset_error=", absl::CEscape(o.dataset.error), "\n");
  absl::StrAppend(&text, "dataset=", absl::CEscape(o.dataset.identity), "\n");
  for (const auto& [name, value] : FeederSettings(o, layout)) {
    absl::StrAppend(&text, name, "=", absl::CEscape(value), "\n");
  }
  return text;
}

std::vector<std::pair<std::string, std::string>> ParseMember(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> fields;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t eq = line.find('=');
    std::string value;
    if (eq == absl::string_view::npos || !absl::CUnescape(line.substr(eq + 1), &value)) continue;
    fields.emplace_back(std::string(line.substr(0, eq)), std::move(value));
  }
  return fields;
}

std::string FieldOf(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& name) {
  for (const auto& [n, v] : fields) {
    if (n == name) return v;
  }
  return "";
}

}  // namespace

absl::Status internal::CheckGroupAgreement(const std::vector<std::string>& described, const std::vector<int>& ranks) {
  std::vector<std::vector<std::pair<std::string, std::string>>> members;
  for (const std::string& d : described) members.push_back(ParseMember(d));
  // A member that could not open its dataset: every member says who and why (the code is that
  // member's own: NotFound for a missing dataset, and so on).
  for (size_t m = 0; m < members.size(); ++m) {
    const std::string error = FieldOf(members[m], "dataset_error");
    if (error.empty()) continue;
    const std::string path = FieldOf(members[m], "dataset_path");
    const absl::StatusCode code = static_cast<absl::StatusCode>(std::atoi(error.c_str()));
    return absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : code,
                        absl::StrCat(m == 0 ? "the group leader" : absl::StrCat("group member ", m), " (rank ",
                                     ranks[m], ") cannot open its dataset \"", path, "\": ",
                                     error.substr(std::min(error.size(), error.find(' ') + 1))));
  }
  const auto& leader = members[0];
  for (size_t m = 1; m < members.size(); ++m) {
    std::vector<std::string> differences;
    bool dataset_differs = false;
    for (const auto& [name, value] : leader) {
      if (name == "dataset_path" || name == "dataset_error") continue;
      const std::string theirs = FieldOf(members[m], name);
      if (theirs == value) continue;
      if (name == "dataset") {
        dataset_differs = !value.empty() && !theirs.empty();
        continue;
      }
      differences.push_back(absl::StrCat(name, " ", theirs, " (the leader: ", value, ")"));
    }
    if (!dataset_differs && differences.empty()) continue;
    std::string message = absl::StrCat("group member ", m, " (rank ", ranks[m], ") and its leader (rank ", ranks[0],
                                       ") disagree: ");
    if (dataset_differs) {
      absl::StrAppend(&message, "it opened the dataset \"", FieldOf(members[m], "dataset_path"), "\" (",
                      FieldOf(members[m], "dataset"), "), the leader \"", FieldOf(leader, "dataset_path"), "\" (",
                      FieldOf(leader, "dataset"), ")", differences.empty() ? "" : "; ");
    }
    if (!differences.empty()) absl::StrAppend(&message, "its settings differ: ", absl::StrJoin(differences, ", "));
    absl::StrAppend(&message,
                    ". Every member of a group must name the same dataset (a copy at another path is fine) with the "
                    "same settings; if every rank passes the same ones, the ranks created their loaders (pipelines) "
                    "in different orders: create them in the same order on every rank");
    return absl::InvalidArgumentError(message);
  }
  return absl::OkStatus();
}


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
  if (options.read_ahead < 0) return absl::InvalidArgumentError("feeder read-ahead must not be negative");
  if (options.depth < 1) return absl::InvalidArgumentError("feeder depth must be at least 1");
  auto f = std::unique_ptr<GroupFeeder>(new GroupFeeder());
  f->reader_ = reads ? reader : nullptr;
  f->layout_ = layout;
  f->rank_ = rank;
  f->local_rank_ = layout.local_group_rank(rank);
  f->group_ = std::move(group);
  f->options_ = options;
  DDPIO_RETURN_IF_ERROR(f->Agree());
  if (reads && reader == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank,
                                                   layout.is_leader(rank) ? " leads its group" : " reads for itself",
                                                   " and needs the dataset"));
  }
  DDPIO_RETURN_IF_ERROR(f->Setup());
  return f;
}

int GroupFeeder::stream_rank(int member_rank) const {
  return options_.mode == FeedMode::kShard ? member_rank : layout_->group_rank(member_rank);
}

absl::Status GroupFeeder::Agree() {
  // Every member describes its settings and its dataset; every member checks all of them, so a
  // disagreement fails the whole group at once, each member naming the same culprit. The
  // dataset's size comes from the leader (in the group communicator's memory: the device's over
  // NCCL).
  const std::chrono::milliseconds timeout = options_.timeout;
  if (options_.dataset.identity.empty() && options_.dataset.error.empty() && reader_ != nullptr) {
    options_.dataset.identity = storage::DatasetIdentity(reader_->header(), reader_->completion());
    options_.dataset.path = reader_->path();
  }
  absl::StatusOr<std::vector<std::string>> described =
      comm::AllGatherStrings(*group_, DescribeMember(options_, *layout_), timeout);
  if (!described.ok()) return Annotate(described.status(), "agreeing on the group feeder's settings");
  DDPIO_RETURN_IF_ERROR(internal::CheckGroupAgreement(*described, layout_->members(rank_)));
  uint64_t size = reader_ != nullptr ? reader_->size() : 0;
  DDPIO_RETURN_IF_ERROR(Annotate(comm::BroadcastHost(*group_, &size, sizeof(size), 0, timeout),
                                 "agreeing on the dataset's size"));
  dataset_size_ = size;
  return absl::OkStatus();
}

absl::Status GroupFeeder::Setup() {
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
  const size_t pixels =
      static_cast<size_t>(options_.loader.augment.out_width()) * options_.loader.augment.out_height() * 3;
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
  // Past the held limit with HeldOverflow::kCopy (host buffers only): the batch goes out as a copy.
  const bool may_copy = options_.loader.held_overflow == loader::LoaderOptions::HeldOverflow::kCopy && !device_;
  absl::Status gate = decoded_held_->Acquire(may_copy ? std::chrono::milliseconds(0) : options_.loader.held_timeout,
                                             window_->name());
  if (!gate.ok() && !(may_copy && loader::IsHeldLimit(gate))) return gate;
  const bool copy = !gate.ok();
  absl::StatusOr<FeedItem> taken = window_->Take(delivered_, stop_);
  absl::Status st = taken.status();
  if (st.ok()) {
    st = internal::CheckDecoded(taken->header, *plan_, stream_rank(rank_), delivered_, batches_[delivered_],
                                options_.loader, window_->name());
  }
  if (st.ok() && taken->header.has_crc && taken->device == nullptr) {
    // The batch as its leader decoded it, or DataLoss: a batch damaged on the way is never trained on.
    const uint32_t crc = storage::Crc32c(taken->payload.data(), taken->payload.size());
    if (crc != taken->header.payload_crc) {
      st = absl::DataLossError(absl::StrCat("decoded batch ", delivered_, " of epoch ", taken->header.epoch, " from ",
                                            window_->name(), " is damaged: its payload's CRC32C is ",
                                            absl::Hex(crc, absl::kZeroPad8), ", the sender's ",
                                            absl::Hex(taken->header.payload_crc, absl::kZeroPad8)));
    }
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
    window_->Recycle(std::move(taken->payload));
    ++copied_total_;
    return copied;
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
  c.batches_copied = copied_total_;
  if (loader_ != nullptr) {
    loader::LoaderStats ls = loader_->stats();
    c.batches_copied += ls.copied;
    c.bad_samples = ls.bad_samples;
    c.skipped = std::move(ls.skipped);
  }
  return c;
}

}  // namespace ddpio::broadcast
