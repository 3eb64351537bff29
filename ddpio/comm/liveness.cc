#include "ddpio/comm/liveness.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddpio::comm {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::string BeatKey(int rank) { return absl::StrCat("beat/", rank); }
std::string AddressKey(int rank) { return absl::StrCat("addr/", rank); }
// A census is a round: its first asker counts and posts census/verdict/<round>; one that finds
// everyone answering starts the next round, so it cannot answer a later census after a loss.
constexpr char kRound[] = "census/round";
std::string TakerKey(int64_t round) { return absl::StrCat("census/taker/", round); }
std::string VerdictKey(int64_t round) { return absl::StrCat("census/verdict/", round); }
constexpr int kNamed = 16;  // ranks named in the line; the rest counted

}  // namespace

std::chrono::milliseconds HeartbeatPeriod(std::chrono::milliseconds timeout) {
  return std::clamp<std::chrono::milliseconds>(timeout / 20, std::chrono::milliseconds(250),
                                               std::chrono::seconds(5));
}

Heartbeat::Heartbeat(std::shared_ptr<Store> store, std::shared_ptr<Store> beats, int rank,
                     int world, std::string address, std::string store_host,
                     std::chrono::milliseconds period)
    : store_(std::make_shared<PrefixStore>("live", std::move(store))),
      beats_(std::make_shared<PrefixStore>("live", std::move(beats))),
      rank_(rank),
      world_(world),
      store_host_(std::move(store_host)),
      period_(period),
      last_ok_ns_(NowNs()) {
  (void)store_->Set(AddressKey(rank_), address);
  thread_ = std::thread([this] { Run(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Heartbeat::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    if (beats_->Add(BeatKey(rank_), 1).ok()) last_ok_ns_.store(NowNs());
    lock.lock();
    cv_.wait_for(lock, period_, [this] { return stop_; });
  }
}

Census Heartbeat::StoreLost(const absl::Status& why) const {
  Census c;
  c.store_lost = true;
  const auto silent = std::chrono::nanoseconds(NowNs() - last_ok_ns_.load());
  if (!why.ok() && silent <= 3 * period_ + std::chrono::seconds(1)) {
    // It answered beats until just now: the rank serving it may have left after failing itself
    // (before this rank's own collective timed out), or its host went.
    c.line = absl::StrFormat(
        "the job's store (%s) stopped answering %.1f s ago (%s): the rank serving it has left, "
        "failing too, or its host is gone",
        store_host_, std::chrono::duration<double>(silent).count(), why.message());
    return c;
  }
  c.line = absl::StrFormat(
      "the job's store (%s) has not answered this rank's heartbeat for %.1f s: its host is gone "
      "(or cut off), and with it the job%s",
      store_host_, std::chrono::duration<double>(silent).count(),
      why.ok() ? "" : absl::StrCat(" (", why.message(), ")"));
  return c;
}

bool Heartbeat::store_silent() const {
  return std::chrono::nanoseconds(NowNs() - last_ok_ns_.load()) >
         3 * period_ + std::chrono::seconds(1);
}

Census Heartbeat::Take() {
  // A store that stopped acknowledging beats is not asked again (each request would wait out
  // the store's timeout): its host is what vanished.
  if (store_silent()) return StoreLost(absl::OkStatus());
  auto round = store_->Add(kRound, 0);
  if (!round.ok()) return StoreLost(round.status());
  auto taker = store_->Add(TakerKey(*round), 1);
  if (!taker.ok()) return StoreLost(taker.status());
  if (*taker == 1) return Count(*round);
  // Another rank counts: its verdict, or, should it vanish too, a count of our own. Polled, not
  // waited for: no request of ours stays parked on the store.
  const std::string key = VerdictKey(*round);
  const auto deadline =
      Clock::now() + 3 * period_ + std::chrono::milliseconds(world_) + std::chrono::seconds(2);
  while (Clock::now() < deadline) {
    auto posted = store_->Check({key});
    if (!posted.ok()) break;
    if (*posted) {
      auto verdict = store_->Get(key, period_);
      if (verdict.ok()) return Describe(*verdict);
      break;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, period_ / 4, [this] { return stop_; });
  }
  return Count(*round);
}

Census Heartbeat::Count(int64_t round) {
  auto snapshot = [this]() -> absl::StatusOr<std::vector<int64_t>> {
    std::vector<int64_t> v(world_);
    for (int r = 0; r < world_; ++r) {
      auto n = store_->Add(BeatKey(r), 0);
      if (!n.ok()) return n.status();
      v[r] = *n;
    }
    return v;
  };
  auto first = snapshot();
  if (first.ok()) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, period_ * 5 / 2, [this] { return stop_; });
  }
  auto second = first.ok() ? snapshot() : first;
  if (!second.ok()) return StoreLost(second.status());
  std::vector<std::string> stopped;
  for (int r = 0; r < world_; ++r) {
    if (r != rank_ && (*first)[r] == (*second)[r]) stopped.push_back(absl::StrCat(r));
  }
  const std::string verdict = absl::StrJoin(stopped, ",");
  (void)store_->Set(VerdictKey(round), verdict);
  if (stopped.empty()) (void)store_->Add(kRound, 1);  // the next census counts afresh
  return Describe(verdict);
}

Census Heartbeat::Describe(const std::string& verdict) {
  Census c;
  for (absl::string_view s : absl::StrSplit(verdict, ',', absl::SkipEmpty())) {
    int r = 0;
    if (absl::SimpleAtoi(s, &r) && r >= 0 && r < world_) c.vanished.push_back(r);
  }
  if (c.vanished.empty()) return c;
  // Named by their addresses, ranks of one address together: "ranks 2, 3 (10.77.0.3)".
  std::map<std::string, std::vector<int>> by_address;
  std::vector<int> unknown;  // ranks whose address the store did not give
  absl::Status lookup;
  for (size_t i = 0; i < c.vanished.size(); ++i) {
    const int r = c.vanished[i];
    std::string address = "?";
    if (i < kNamed) {
      auto a = store_->Get(AddressKey(r), std::chrono::seconds(1));
      if (a.ok()) {
        address = *a;
      } else {
        unknown.push_back(r);
        lookup = a.status();
      }
      c.addresses[r] = address;
      by_address[address].push_back(r);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [address, ranks] : by_address) {
    parts.push_back(absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "),
                                 " (", address, ")"));
  }
  const int unnamed = static_cast<int>(c.vanished.size()) - kNamed;
  if (unnamed > 0) parts.push_back(absl::StrCat(unnamed, " more"));
  c.line = absl::StrFormat(
      "%s stopped answering: %s heartbeat on the job's store stood still for %.1f s — the "
      "peer%s that vanished",
      absl::StrJoin(parts, ", "), c.vanished.size() == 1 ? "its" : "their",
      std::chrono::duration<double>(period_ * 5 / 2).count(), c.vanished.size() == 1 ? "" : "s");
  if (!unknown.empty()) {
    // The store itself may be going (its rank failing too): say so rather than leave a bare "?".
    absl::StrAppendFormat(
        &c.line, " (the job's store (%s) did not give the address of rank%s %s: %s)", store_host_,
        unknown.size() == 1 ? "" : "s", absl::StrJoin(unknown, ", "), lookup.message());
  }
  return c;
}

}  // namespace ddpio::comm
