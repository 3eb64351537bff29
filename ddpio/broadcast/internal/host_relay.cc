#include "ddpio/broadcast/internal/host_relay.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "ddpio/common/status_macros.h"

namespace ddpio::broadcast::internal {

using Clock = std::chrono::steady_clock;

std::vector<int> HostRelay::Peers() const {
  std::vector<int> to;
  if (ctx_.options.readers == FeedReaders::kAll) return to;
  const int g = ctx_.layout.group_size();
  for (int i = 1; i < (chain() ? std::min(g, 2) : g); ++i) to.push_back(i);
  return to;
}

absl::Status HostRelay::Send(const std::vector<int>& to, FeedHeader h, const uint8_t* data,
                             std::vector<uint8_t>* owned) {
  FeedWindow& window = *ctx_.window;
  bool local = false;
  for (int peer : to) {
    if (peer == 0) {
      local = true;
      continue;
    }
    uint64_t wire = 0;
    const auto t0 = Clock::now();
    absl::Status st = SendFeedMessage(*ctx_.group, peer, h, data, ctx_.options.timeout, &wire);
    ctx_.traffic.network_wait_ns += static_cast<uint64_t>((Clock::now() - t0).count());
    if (!st.ok()) {
      broken_ = true;
      return Annotate(st, absl::StrCat("sending to ", ctx_.MemberName(peer)));
    }
    ++ctx_.traffic.messages_sent;
    ctx_.traffic.bytes_sent += wire;
  }
  if (!local) {
    if (owned != nullptr) window.Recycle(std::move(*owned));
    return absl::OkStatus();
  }
  FeedItem item;
  item.header = std::move(h);
  if (owned != nullptr) {
    item.payload = std::move(*owned);
  } else {
    item.payload = window.SpareBuffer();
    item.payload.assign(data, data + item.header.payload_bytes);
  }
  window.Push(std::move(item));
  return absl::OkStatus();
}

void HostRelay::Receive() {
  FeedWindow& window = *ctx_.window;
  FeedTraffic& traffic = ctx_.traffic;
  const int from = Upstream(), to = Downstream();
  const std::string source = ctx_.MemberName(from);
  for (;;) {
    FeedItem item;
    item.payload = window.SpareBuffer();
    uint64_t wire = 0;
    const auto t0 = Clock::now();
    // In a chain every message goes on to the next member while it arrives, ends and errors too.
    absl::StatusOr<FeedHeader> h =
        to < 0 ? RecvFeedMessage(*ctx_.group, from, &item.payload, ctx_.options.limits,
                                 ctx_.options.timeout, &wire)
               : RelayFeedMessage(*ctx_.group, from, to, &item.payload, ctx_.options.limits,
                                  ctx_.options.timeout, &wire);
    traffic.network_wait_ns += static_cast<uint64_t>((Clock::now() - t0).count());
    if (!h.ok()) {
      window.SetError(Annotate(h.status(), to < 0 ? absl::StrCat("receiving from ", source)
                                                  : absl::StrCat("relaying from ", source, " to ",
                                                                 ctx_.MemberName(to))));
      ctx_.AbortGroup();  // the rest of the group learns at once
      return;
    }
    ++traffic.messages_received;
    traffic.bytes_received += wire;
    if (to >= 0) {
      ++traffic.messages_sent;
      traffic.bytes_sent += wire;
    }
    if (h->error) {
      window.SetError(DecodeFeedError(item.payload, ctx_.layout.leader(ctx_.rank)));
      return;
    }
    if (h->end_of_epoch) {
      window.End();
      return;
    }
    item.header = *std::move(h);
    window.Push(std::move(item));
  }
}

}  // namespace ddpio::broadcast::internal
