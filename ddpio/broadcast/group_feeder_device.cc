// The GroupFeeder over a group communicator in device memory (NCCL). Decoded batches only:
// encoded records are decoded on the CPU by every member's own loader, so they travel in host
// memory over a host transport (Pipeline picks a Gloo group for them).
//
// Every message is a fixed-size header slot (feed_message.h: a receive must be posted with its
// size), then the payload of the size the slot announces. The leader stages each of this step's
// batches, and the slots, host -> device (Communicator::StageIn: a copy stream whose event the
// communication stream waits for), then
//   replicate: ncclBroadcast of the slot and of the batch from the leader to the whole group;
//   shard:     one group of ncclSends — every peer's slot and its own batch — answered by each
//              peer's two ncclRecvs.
// Peers receive straight into a device buffer from a pool; the consumer gets it as
// Batch::device_data (Batch::data is null), and the buffer returns to the pool when the batch is
// released. The receiving thread reads each slot back to the host (it must know the payload's
// size, and checks it like any message); the consumer never waits on the device.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ddpio/broadcast/group_feeder.h"
#include "ddpio/broadcast/internal/group_feeder.h"
#include "ddpio/common/log.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast {

using Clock = std::chrono::steady_clock;

namespace {
constexpr uint64_t kDeviceTag = 0xFEED;  // NCCL has no tags: sends and receives pair in order
constexpr uint32_t kDecodedNdim = 3;     // C,H,W or H,W,C
}  // namespace

namespace internal {

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

}  // namespace internal

absl::Status GroupFeeder::SetupDevice() {
  if (options_.payload != FeedPayload::kDecoded) {
    return absl::InvalidArgumentError(
        "encoded payloads travel in host memory (every member decodes them on its CPU): give the feeder a "
        "host-memory (gloo) group, or use the decoded payload to send batches over NCCL");
  }
  pool_ = std::make_shared<internal::DevicePool>(*group_, options_.loader.batch_size * sample_bytes_);
  slot_bytes_ = FeedSlotBytes(static_cast<uint32_t>(options_.loader.batch_size), kDecodedNdim);
  const int slots = reads_storage() ? layout_->group_size() : 1;
  for (int i = 0; i < slots; ++i) {
    host_slots_.emplace_back(slot_bytes_);
    DDPIO_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> d, group_->Allocate(slot_bytes_));
    device_slots_.push_back(std::move(d));
  }
  if (local_rank_ == 0 && options_.readers == FeedReaders::kLeader) {
    DDPIO_LOG(INFO) << "group feeder: decoded batches travel over " << group_->backend() << " in device memory ("
                    << (options_.mode == FeedMode::kReplicate ? "a broadcast to the group"
                                                              : "grouped sends of each member's share")
                    << ", header slot of " << slot_bytes_ << " bytes first)";
  }
  return absl::OkStatus();
}

absl::Status GroupFeeder::SendDecodedStepDevice(uint64_t epoch, uint64_t step, bool* more) {
  struct Out {
    const Member* member;
    FeedHeader header;
    std::shared_ptr<uint8_t> buffer;
  };
  std::vector<Out> outs;
  // This step's batch of every stream, staged on the device; each loader's batch stays valid
  // (its source of the copy) until that loader's next Next, after this step's transfer.
  DDPIO_RETURN_IF_ERROR(ForEachDecodedBatch(epoch, step, more, [&](Member& m, const loader::Batch& b, FeedHeader h) {
    Out o{&m, std::move(h), nullptr};
    DDPIO_ASSIGN_OR_RETURN(o.buffer, pool_->Get());
    DDPIO_RETURN_IF_ERROR(group_->StageIn(o.buffer.get(), b.data, b.bytes));
    DDPIO_RETURN_IF_ERROR(EncodeFeedSlot(o.header, &host_slots_[outs.size()]));
    DDPIO_RETURN_IF_ERROR(
        group_->StageIn(device_slots_[outs.size()].get(), host_slots_[outs.size()].data(), slot_bytes_));
    outs.push_back(std::move(o));
    return absl::OkStatus();
  }));
  if (outs.empty()) return absl::OkStatus();

  const std::vector<int> peers = LeaderTargets();
  const auto t0 = Clock::now();
  absl::Status st;
  uint64_t messages = 0, wire = 0;
  if (options_.mode == FeedMode::kReplicate && !peers.empty()) {
    st = group_->Broadcast(device_slots_[0].get(), slot_bytes_, 0, options_.timeout);
    if (st.ok()) st = group_->Broadcast(outs[0].buffer.get(), outs[0].header.payload_bytes, 0, options_.timeout);
    messages = peers.size();
    wire = peers.size() * (slot_bytes_ + outs[0].header.payload_bytes);
  } else {
    std::vector<comm::Communicator::SendPart> parts;
    for (size_t i = 0; i < outs.size(); ++i) {
      for (int peer : outs[i].member->to) {
        if (peer == 0) continue;
        parts.push_back({device_slots_[i].get(), slot_bytes_, peer});
        parts.push_back({outs[i].buffer.get(), outs[i].header.payload_bytes, peer});
        ++messages;
        wire += slot_bytes_ + outs[i].header.payload_bytes;
      }
    }
    // Without a transfer (a group of one, every rank reading): the staged copies must still be
    // complete before the leader's own batch is handed out.
    st = parts.empty() ? group_->Synchronize(options_.timeout) : group_->SendMany(parts, kDeviceTag, options_.timeout);
  }
  network_wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
  if (!st.ok()) {
    comm_broken_ = true;
    return Annotate(st, absl::StrCat("sending batch ", step, " to the group over ", group_->backend()));
  }
  messages_sent_ += messages;
  bytes_sent_ += wire;
  for (Out& o : outs) {
    if (std::find(o.member->to.begin(), o.member->to.end(), 0) == o.member->to.end()) continue;
    FeedItem item;
    item.header = std::move(o.header);
    item.device = std::move(o.buffer);
    window_->Push(std::move(item));
  }
  return absl::OkStatus();
}

absl::Status GroupFeeder::DeliverDevice(const FeedHeader& h, const uint8_t* data) {
  const std::vector<int> peers = LeaderTargets();
  if (peers.empty()) return absl::OkStatus();
  DDPIO_RETURN_IF_ERROR(EncodeFeedSlot(h, &host_slots_[0]));
  DDPIO_RETURN_IF_ERROR(group_->StageIn(device_slots_[0].get(), host_slots_[0].data(), slot_bytes_));
  std::shared_ptr<uint8_t> payload;
  if (h.payload_bytes > 0) {
    DDPIO_ASSIGN_OR_RETURN(payload, group_->Allocate(h.payload_bytes));
    DDPIO_RETURN_IF_ERROR(group_->StageIn(payload.get(), data, h.payload_bytes));
  }
  absl::Status st;
  if (options_.mode == FeedMode::kReplicate) {
    st = group_->Broadcast(device_slots_[0].get(), slot_bytes_, 0, options_.timeout);
    if (st.ok() && payload != nullptr) st = group_->Broadcast(payload.get(), h.payload_bytes, 0, options_.timeout);
  } else {
    std::vector<comm::Communicator::SendPart> parts;
    for (int peer : peers) {
      parts.push_back({device_slots_[0].get(), slot_bytes_, peer});
      parts.push_back({payload.get(), h.payload_bytes, peer});
    }
    st = group_->SendMany(parts, kDeviceTag, options_.timeout);
  }
  if (!st.ok()) {
    comm_broken_ = true;
    return Annotate(st, absl::StrCat("sending the ", h.error ? "error" : "end of the epoch", " to the group"));
  }
  messages_sent_ += peers.size();
  bytes_sent_ += peers.size() * (slot_bytes_ + h.payload_bytes);
  return absl::OkStatus();
}

void GroupFeeder::PeerRunDevice() {
  const int leader = layout_->members(rank_)[0];
  const std::string source = absl::StrCat("the group leader (rank ", leader, ")");
  const bool broadcast = options_.mode == FeedMode::kReplicate;
  auto receive = [&](void* p, size_t n) {
    return broadcast ? group_->Broadcast(p, n, 0, options_.timeout)
                     : group_->Recv(p, n, 0, kDeviceTag, options_.timeout);
  };
  auto fail = [&](const absl::Status& st) {
    window_->SetError(Annotate(st, absl::StrCat("receiving from ", source, " over ", group_->backend())));
    group_->Abort();  // the rest of the group learns at once
  };
  std::vector<uint8_t>& slot = host_slots_[0];
  for (;;) {
    const auto t0 = Clock::now();
    absl::Status st = receive(device_slots_[0].get(), slot_bytes_);
    if (st.ok()) st = group_->CopyOut(slot.data(), device_slots_[0].get(), slot_bytes_, options_.timeout);
    absl::StatusOr<FeedHeader> h = st.ok() ? DecodeFeedSlot(slot, options_.limits, source) : st;
    if (!h.ok()) return fail(h.status());
    std::shared_ptr<uint8_t> buffer;
    if (h->error) {  // (the header's check bounds its size)
      absl::StatusOr<std::shared_ptr<uint8_t>> b = group_->Allocate(h->payload_bytes);
      st = b.status();
      if (st.ok()) buffer = *std::move(b);
    } else if (!h->end_of_epoch) {
      if (h->payload_bytes > pool_->bytes()) {
        return fail(absl::DataLossError(absl::StrCat("a batch of ", h->payload_bytes, " bytes, more than the ",
                                                     pool_->bytes(), " of this rank's batch size")));
      }
      absl::StatusOr<std::shared_ptr<uint8_t>> b = pool_->Get();
      st = b.status();
      if (st.ok()) buffer = *std::move(b);
    }
    if (st.ok() && buffer != nullptr) st = receive(buffer.get(), h->payload_bytes);
    network_wait_ns_ += static_cast<uint64_t>((Clock::now() - t0).count());
    if (!st.ok()) return fail(st);
    ++messages_received_;
    bytes_received_ += slot_bytes_ + h->payload_bytes;
    if (h->error) {
      std::vector<uint8_t> text(h->payload_bytes);
      st = group_->CopyOut(text.data(), buffer.get(), text.size(), options_.timeout);
      window_->SetError(st.ok() ? DecodeFeedError(text, leader) : st);
      return;
    }
    if (h->end_of_epoch) {
      window_->End();
      return;
    }
    FeedItem item;
    item.header = *std::move(h);
    item.device = std::move(buffer);
    window_->Push(std::move(item));
  }
}

}  // namespace ddpio::broadcast
