#include "gateway/rate_limit.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace mb::gateway {
namespace {

constexpr int64_t kMsPerMinute = 60'000;
constexpr int64_t kIdleMs = 60'000;  // a bucket unused this long is full again: dropping it is free

// Bucket::tokens holds tokens x 60000 ("token-milliseconds per minute"): a
// refill of elapsed_ms at weight_per_minute then adds the integer
// elapsed_ms x weight_per_minute, so every value stays an integer that a
// double holds exactly (burst x 60000 < 2^53) and retry_after is exact.
constexpr int64_t kScale = kMsPerMinute;

int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

uint32_t SaturatingAdd(uint32_t a, uint32_t b) {
  return a > std::numeric_limits<uint32_t>::max() - b ? std::numeric_limits<uint32_t>::max()
                                                      : a + b;
}

}  // namespace

RateLimiter::RateLimiter(RateLimitOptions options) : options_(options) {}

RateDecision RateLimiter::Take(std::string_view key, uint32_t weight, int64_t now_ms) {
  Stripe& stripe = stripes_[std::hash<std::string_view>{}(key) % stripes_.size()];
  const int64_t capacity = int64_t{options_.burst} * kScale;
  const int64_t minute = FloorDiv(now_ms, kMsPerMinute);

  MutexLock lock(stripe.mu);
  auto it = stripe.buckets.find(std::string(key));
  if (it == stripe.buckets.end()) {
    const std::size_t per_stripe = std::max<std::size_t>(1, options_.max_keys / stripes_.size());
    if (stripe.buckets.size() >= per_stripe) {
      std::erase_if(stripe.buckets,
                    [&](const auto& entry) { return now_ms - entry.second.refilled_ms > kIdleMs; });
    }
    if (stripe.buckets.size() >= per_stripe) {
      // Every bucket is in use: drop the least recently used one.
      const auto oldest = std::min_element(
          stripe.buckets.begin(), stripe.buckets.end(),
          [](const auto& a, const auto& b) { return a.second.refilled_ms < b.second.refilled_ms; });
      stripe.buckets.erase(oldest);
    }
    Bucket fresh;
    fresh.tokens = static_cast<double>(capacity);
    fresh.refilled_ms = now_ms;
    it = stripe.buckets.emplace(std::string(key), fresh).first;
  }
  Bucket& b = it->second;

  if (b.minute != minute) {
    // Binance's X-MBX-USED-WEIGHT-1M counts per calendar minute.
    b.minute = minute;
    b.minute_weight = 0;
  }
  if (now_ms > b.refilled_ms) {
    // A clock that goes back refills nothing and keeps the later time.
    const int64_t rate = options_.weight_per_minute;
    // Past the time an empty bucket takes to fill, more time adds nothing; the
    // bound keeps elapsed x rate far from overflow.
    const int64_t fill_ms = rate == 0 ? 0 : capacity / rate + 1;
    const int64_t refill = std::min(now_ms - b.refilled_ms, fill_ms) * rate;
    b.tokens = static_cast<double>(std::min(capacity, static_cast<int64_t>(b.tokens) + refill));
    b.refilled_ms = now_ms;
  }

  RateDecision d;
  if (options_.weight_per_minute == 0) {
    // No limit, but the used weight is still reported.
    b.minute_weight = SaturatingAdd(b.minute_weight, weight);
    d.used_weight_1m = b.minute_weight;
    return d;
  }
  const int64_t need = int64_t{weight} * kScale;
  if (weight > options_.burst) {
    // Can never be served: a full bucket is too small.
    d.allowed = false;
    d.retry_after_s = 60;
  } else if (static_cast<int64_t>(b.tokens) >= need) {
    b.tokens = static_cast<double>(static_cast<int64_t>(b.tokens) - need);
    b.minute_weight = SaturatingAdd(b.minute_weight, weight);
  } else {
    // A refused request takes nothing and is not counted in the used weight.
    const int64_t deficit = need - static_cast<int64_t>(b.tokens);
    const int64_t wait_ms = (deficit + options_.weight_per_minute - 1) / options_.weight_per_minute;
    const int64_t wait_s = (wait_ms + 999) / 1000;
    d.allowed = false;
    d.retry_after_s =
        static_cast<uint32_t>(std::clamp<int64_t>(wait_s, 1, std::numeric_limits<uint32_t>::max()));
  }
  d.used_weight_1m = b.minute_weight;
  return d;
}

OrderCountLimiter::OrderCountLimiter(OrderLimitOptions options) : options_(options) {}

OrderCountDecision OrderCountLimiter::Take(uint64_t account, int64_t now_ms) {
  constexpr int64_t kWindowMs = 10'000;
  constexpr int64_t kDayMs = 86'400'000;
  const int64_t window = FloorDiv(now_ms, kWindowMs);
  const int64_t day = FloorDiv(now_ms, kDayMs);
  Stripe& stripe = stripes_[account % stripes_.size()];
  MutexLock lock(stripe.mu);
  auto it = stripe.counts.find(account);
  if (it == stripe.counts.end()) {
    const std::size_t per_stripe =
        std::max<std::size_t>(1, options_.max_accounts / stripes_.size());
    if (stripe.counts.size() >= per_stripe) {
      std::erase_if(stripe.counts, [&](const auto& entry) { return entry.second.day != day; });
    }
    // Still full of today's counters: one is forgotten (its account counts
    // from zero again), which only ever lets an order through.
    if (stripe.counts.size() >= per_stripe) stripe.counts.erase(stripe.counts.begin());
    it = stripe.counts.emplace(account, Counts{}).first;
  }
  Counts& c = it->second;
  if (c.window != window) {
    c.window = window;
    c.in_window = 0;
  }
  if (c.day != day) {
    c.day = day;
    c.in_day = 0;
  }
  OrderCountDecision d;
  if (options_.per_10s != 0 && c.in_window >= options_.per_10s) {
    d.allowed = false;
    d.retry_after_s = static_cast<uint32_t>(((window + 1) * kWindowMs - now_ms + 999) / 1000);
  } else if (options_.per_day != 0 && c.in_day >= options_.per_day) {
    d.allowed = false;
    d.day_limit = true;
    d.retry_after_s = static_cast<uint32_t>(((day + 1) * kDayMs - now_ms + 999) / 1000);
  } else {
    c.in_window = SaturatingAdd(c.in_window, 1);
    c.in_day = SaturatingAdd(c.in_day, 1);
  }
  d.count_10s = c.in_window;
  d.count_1d = c.in_day;
  return d;
}

}  // namespace mb::gateway
