#include "ddpio/broadcast/internal/device_link.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast::internal {

using Clock = std::chrono::steady_clock;

namespace {
constexpr uint64_t kDeviceTag = 0xFEED;  // NCCL has no tags: sends and receives pair in order
constexpr uint32_t kDecodedNdim = 3;     // C,H,W or H,W,C
}  // namespace

absl::StatusOr<std::shared_ptr<uint8_t>> DevicePool::Get() {
  std::shared_ptr<uint8_t> raw;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      raw = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (raw == nullptr) {
    DDPIO_ASSIGN_OR_RETURN(raw, comm_.Allocate(bytes_));
  }
  uint8_t* p = raw.get();
  std::weak_ptr<DevicePool> self = weak_from_this();
  return std::shared_ptr<uint8_t>(p, [self, raw = std::move(raw)](uint8_t*) mutable {
    if (auto pool = self.lock()) {
      std::lock_guard<std::mutex> lock(pool->mu_);
      pool->free_.push_back(std::move(raw));
    }
  });
}

absl::Status DeviceLink::Setup(size_t sample_bytes) {
  const FeederOptions& o = ctx_.options;
  if (o.payload != FeedPayload::kDecoded) {
    return absl::InvalidArgumentError(
        "encoded payloads travel in host memory (every member decodes them on its CPU): give the "
        "feeder a "
        "host-memory (gloo) group, or use the decoded payload to send batches over NCCL");
  }
  pool_ = std::make_shared<DevicePool>(*ctx_.group, o.loader.batch_size * sample_bytes);
  slot_bytes_ = FeedSlotBytes(static_cast<uint32_t>(o.loader.batch_size), kDecodedNdim);
  const int slots = ctx_.reads_storage() ? ctx_.layout.group_size() : 1;
  for (int i = 0; i < slots; ++i) {
    host_slots_.emplace_back(slot_bytes_);
    DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> d, ctx_.group->Allocate(slot_bytes_));
    device_slots_.push_back(std::move(d));
  }
  if (ctx_.local_rank() == 0 && o.readers == FeedReaders::kLeader) {
    DDPIO_LOG(INFO) << "group feeder: decoded batches travel over " << ctx_.group->backend()
                    << " in device memory ("
                    << (o.mode == FeedMode::kReplicate ? "a broadcast to the group"
                                                       : "grouped sends of each member's share")
                    << ", header slot of " << slot_bytes_ << " bytes first)";
  }
  return absl::OkStatus();
}

std::vector<int> DeviceLink::Peers() const {
  std::vector<int> to;
  if (ctx_.options.readers == FeedReaders::kAll) return to;
  for (int i = 1; i < ctx_.layout.group_size(); ++i) to.push_back(i);
  return to;
}

absl::Status DeviceLink::Send(const std::vector<int>& to, FeedHeader h, const uint8_t* data,
                              std::vector<uint8_t>* /*owned*/) {
  // Staged on the device; the source of the copy (a member loader's batch) stays valid until
  // that loader's next Next, after this step's transfer.
  comm::Communicator& group = *ctx_.group;
  const size_t i = staged_.size();
  Staged o{&to, std::move(h), nullptr};
  DDPIO_ASSIGN_OR_RETURN(o.buffer, pool_->Get());
  DDPIO_RETURN_IF_ERROR(group.StageIn(o.buffer.get(), data, o.header.payload_bytes));
  DDPIO_RETURN_IF_ERROR(EncodeFeedSlot(o.header, &host_slots_[i]));
  DDPIO_RETURN_IF_ERROR(group.StageIn(device_slots_[i].get(), host_slots_[i].data(), slot_bytes_));
  staged_.push_back(std::move(o));
  return absl::OkStatus();
}

absl::Status DeviceLink::EndStep(uint64_t step, absl::Status status) {
  if (status.ok() && !staged_.empty()) status = Transfer(step);
  staged_.clear();
  return status;
}

absl::Status DeviceLink::Transfer(uint64_t step) {
  comm::Communicator& group = *ctx_.group;
  const std::chrono::milliseconds timeout = ctx_.options.timeout;
  const std::vector<int> peers = Peers();
  const auto t0 = Clock::now();
  absl::Status st;
  uint64_t messages = 0, wire = 0;
  if (ctx_.options.mode == FeedMode::kReplicate && !peers.empty()) {
    st = group.Broadcast(device_slots_[0].get(), slot_bytes_, 0, timeout);
    if (st.ok())
      st = group.Broadcast(staged_[0].buffer.get(), staged_[0].header.payload_bytes, 0, timeout);
    messages = peers.size();
    wire = peers.size() * (slot_bytes_ + staged_[0].header.payload_bytes);
  } else {
    std::vector<comm::Communicator::SendPart> parts;
    for (size_t i = 0; i < staged_.size(); ++i) {
      for (int peer : *staged_[i].to) {
        if (peer == 0) continue;
        parts.push_back({device_slots_[i].get(), slot_bytes_, peer});
        parts.push_back({staged_[i].buffer.get(), staged_[i].header.payload_bytes, peer});
        ++messages;
        wire += slot_bytes_ + staged_[i].header.payload_bytes;
      }
    }
    // Without a transfer (a group of one, every rank reading): the staged copies must still be
    // complete before the leader's own batch is handed out.
    st = parts.empty() ? group.Synchronize(timeout) : group.SendMany(parts, kDeviceTag, timeout);
  }
  ctx_.traffic.network_wait_ns += static_cast<uint64_t>((Clock::now() - t0).count());
  if (!st.ok()) {
    broken_ = true;
    return Annotate(st,
                    absl::StrCat("sending batch ", step, " to the group over ", group.backend()));
  }
  ctx_.traffic.messages_sent += messages;
  ctx_.traffic.bytes_sent += wire;
  for (Staged& o : staged_) {
    if (std::find(o.to->begin(), o.to->end(), 0) == o.to->end()) continue;
    FeedItem item;
    item.header = std::move(o.header);
    item.device = std::move(o.buffer);
    ctx_.window->Push(std::move(item));
  }
  return absl::OkStatus();
}

absl::Status DeviceLink::SendLast(const FeedHeader& h, const uint8_t* data) {
  comm::Communicator& group = *ctx_.group;
  const std::chrono::milliseconds timeout = ctx_.options.timeout;
  const std::vector<int> peers = Peers();
  if (peers.empty()) return absl::OkStatus();
  DDPIO_RETURN_IF_ERROR(EncodeFeedSlot(h, &host_slots_[0]));
  DDPIO_RETURN_IF_ERROR(group.StageIn(device_slots_[0].get(), host_slots_[0].data(), slot_bytes_));
  std::shared_ptr<uint8_t> payload;
  if (h.payload_bytes > 0) {
    DDPIO_ASSIGN_OR_RETURN(payload, group.Allocate(h.payload_bytes));
    DDPIO_RETURN_IF_ERROR(group.StageIn(payload.get(), data, h.payload_bytes));
  }
  absl::Status st;
  if (ctx_.options.mode == FeedMode::kReplicate) {
    st = group.Broadcast(device_slots_[0].get(), slot_bytes_, 0, timeout);
    if (st.ok() && payload != nullptr)
      st = group.Broadcast(payload.get(), h.payload_bytes, 0, timeout);
  } else {
    std::vector<comm::Communicator::SendPart> parts;
    for (int peer : peers) {
      parts.push_back({device_slots_[0].get(), slot_bytes_, peer});
      parts.push_back({payload.get(), h.payload_bytes, peer});
    }
    st = group.SendMany(parts, kDeviceTag, timeout);
  }
  if (!st.ok()) {
    broken_ = true;
    return Annotate(
        st, absl::StrCat("sending the ", h.error ? "error" : "end of the epoch", " to the group"));
  }
  ctx_.traffic.messages_sent += peers.size();
  ctx_.traffic.bytes_sent += peers.size() * (slot_bytes_ + h.payload_bytes);
  return absl::OkStatus();
}

void DeviceLink::Receive() {
  comm::Communicator& group = *ctx_.group;
  FeedWindow& window = *ctx_.window;
  FeedTraffic& traffic = ctx_.traffic;
  const std::chrono::milliseconds timeout = ctx_.options.timeout;
  const int leader = ctx_.layout.members(ctx_.rank)[0];
  const std::string source = ctx_.MemberName(0);
  const bool broadcast = ctx_.options.mode == FeedMode::kReplicate;
  auto receive = [&](void* p, size_t n) {
    return broadcast ? group.Broadcast(p, n, 0, timeout) : group.Recv(p, n, 0, kDeviceTag, timeout);
  };
  auto fail = [&](const absl::Status& st) {
    window.SetError(
        Annotate(st, absl::StrCat("receiving from ", source, " over ", group.backend())));
    ctx_.AbortGroup();  // the rest of the group learns at once
  };
  std::vector<uint8_t>& slot = host_slots_[0];
  for (;;) {
    const auto t0 = Clock::now();
    absl::Status st = receive(device_slots_[0].get(), slot_bytes_);
    if (st.ok()) st = group.CopyOut(slot.data(), device_slots_[0].get(), slot_bytes_, timeout);
    absl::StatusOr<FeedHeader> h = st.ok() ? DecodeFeedSlot(slot, ctx_.options.limits, source) : st;
    if (!h.ok()) return fail(h.status());
    std::shared_ptr<uint8_t> buffer;
    if (h->error) {  // (the header's check bounds its size)
      absl::StatusOr<std::shared_ptr<uint8_t>> b = group.Allocate(h->payload_bytes);
      st = b.status();
      if (st.ok()) buffer = *std::move(b);
    } else if (!h->end_of_epoch) {
      if (h->payload_bytes > pool_->bytes()) {
        return fail(absl::DataLossError(absl::StrCat("a batch of ", h->payload_bytes,
                                                     " bytes, more than the ", pool_->bytes(),
                                                     " of this rank's batch size")));
      }
      absl::StatusOr<std::shared_ptr<uint8_t>> b = pool_->Get();
      st = b.status();
      if (st.ok()) buffer = *std::move(b);
    }
    if (st.ok() && buffer != nullptr) st = receive(buffer.get(), h->payload_bytes);
    traffic.network_wait_ns += static_cast<uint64_t>((Clock::now() - t0).count());
    if (!st.ok()) return fail(st);
    ++traffic.messages_received;
    traffic.bytes_received += slot_bytes_ + h->payload_bytes;
    if (h->error) {
      std::vector<uint8_t> text(h->payload_bytes);
      st = group.CopyOut(text.data(), buffer.get(), text.size(), timeout);
      window.SetError(st.ok() ? DecodeFeedError(text, leader) : st);
      return;
    }
    if (h->end_of_epoch) {
      window.End();
      return;
    }
    FeedItem item;
    item.header = *std::move(h);
    item.device = std::move(buffer);
    window.Push(std::move(item));
  }
}

}  // namespace ddpio::broadcast::internal
