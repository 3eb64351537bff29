#include "ddpio/storage/s3/rate_governor.h"

#include <algorithm>

namespace ddpio::storage::s3 {
namespace {

using Seconds = std::chrono::duration<double>;
constexpr std::chrono::seconds kEpisode(10);

}  // namespace

RateGovernor::RateGovernor(const Options& options, Clock::time_point now)
    : options_(options), refilled_(now), grown_(now), last_decrease_(now), sent_(now) {
  options_.min_per_s = std::max(options_.min_per_s, 1e-3);
  if (options_.max_per_s > 0) {
    // A cap below the floor is kept: the floor gives way (a job's cap shared by many readers).
    options_.min_per_s = std::min(options_.min_per_s, options_.max_per_s);
    limited_ = true;
    rate_ = options_.max_per_s;
  }
}

void RateGovernor::Refill(Clock::time_point now) {
  // A short burst allowed: a twentieth of a second's worth, at least one request.
  const double burst = std::max(1.0, rate_ / 20);
  tokens_ = std::min(burst, tokens_ + rate_ * Seconds(now - refilled_).count());
  refilled_ = now;
}

void RateGovernor::Charge(Clock::time_point now) {
  sent_.Add(now);
  if (!limited_) return;
  Refill(now);
  tokens_ = std::max(tokens_ - 1, -rate_);
}

std::optional<RateGovernor::Clock::time_point> RateGovernor::Admit(Clock::time_point now) {
  if (limited_) {
    Refill(now);
    if (tokens_ < 1) {
      return now + std::chrono::duration_cast<Clock::duration>(Seconds((1 - tokens_) / rate_));
    }
    tokens_ -= 1;
  }
  sent_.Add(now);
  return std::nullopt;
}

void RateGovernor::Succeeded(Clock::time_point now) {
  if (!limited_ || !decreased_) {
    grown_ = now;
    return;
  }
  // Growth for the time since the last success, at most a second of it (after an idle spell the
  // store is not known to take more).
  const double dt = std::min(Seconds(now - grown_).count(), 1.0);
  grown_ = now;
  rate_ += step_ * dt;
  if (options_.max_per_s > 0) rate_ = std::min(rate_, options_.max_per_s);
}

void RateGovernor::Throttled(Clock::time_point now) {
  ++throttles_;
  Decrease(now);
}

void RateGovernor::PeerThrottled(Clock::time_point now) { Decrease(now); }

void RateGovernor::Decrease(Clock::time_point now) {
  if (decreased_ && now - last_decrease_ < options_.reaction) return;  // the same burst
  if (limited_) {
    Refill(now);
  } else {
    refilled_ = now;
  }
  const double sent = sent_.per_s(now);
  double from = limited_ ? rate_ : sent;
  if (sent > 0) from = std::min(from, sent);
  if (from <= 0) from = options_.min_per_s;
  rate_ = std::max(options_.min_per_s, from * options_.decrease);
  // Growth: a tenth of the rate the episode fell from, a second. Decreases less than kEpisode
  // apart are one episode (a storm of 503s halving the rate again and again): its first, largest
  // rate sets the growth, so that the rate is back within ~10 s however far the storm drove it.
  const bool same_episode = decreased_ && now - last_decrease_ < kEpisode;
  step_ = std::max({1.0, from / 10, same_episode ? step_ : 0.0});
  limited_ = true;
  decreased_ = true;
  last_decrease_ = now;
  grown_ = now;
  tokens_ = std::min(tokens_, 1.0);
  ++decreases_;
}

}  // namespace ddpio::storage::s3
