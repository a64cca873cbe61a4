// Request-weight limits: a token bucket per API key and per IP, and the used
// weight of the current minute for the X-MBX-USED-WEIGHT-1M header. Order
// counts: new orders per account in the current 10 seconds and day, for the
// X-MBX-ORDER-COUNT-10S / -1D headers and Binance's ORDERS limits.
//
// Thread safety: any thread (striped mutexes).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/thread_annotations.h"

namespace mb::gateway {

struct RateLimitOptions {
  uint32_t weight_per_minute = 6000;  // refill rate; 0 disables the limit
  uint32_t burst = 6000;              // bucket capacity
  std::size_t max_keys = 100'000;     // buckets kept; least recently used dropped past it
};

struct RateDecision {
  bool allowed = true;
  uint32_t retry_after_s = 0;   // when refused
  uint32_t used_weight_1m = 0;  // this key's weight in the current minute, this request included
};

class RateLimiter {
 public:
  explicit RateLimiter(RateLimitOptions options);
  // Takes `weight` tokens from the bucket of `key` at time now_ms.
  RateDecision Take(std::string_view key, uint32_t weight, int64_t now_ms);

 private:
  struct Bucket {
    double tokens = 0;
    int64_t refilled_ms = 0;
    int64_t minute = -1;
    uint32_t minute_weight = 0;
  };
  struct Stripe {
    Mutex mu;
    std::unordered_map<std::string, Bucket> buckets MB_GUARDED_BY(mu);
  };
  RateLimitOptions options_;
  std::array<Stripe, 16> stripes_;
};

struct OrderLimitOptions {
  uint32_t per_10s = 0;                // new orders per account per 10 s; 0: no limit
  uint32_t per_day = 0;                // per account per UTC day; 0: no limit
  std::size_t max_accounts = 100'000;  // counters kept; those of past days dropped first
};

struct OrderCountDecision {
  bool allowed = true;
  bool day_limit = false;      // refused by the daily limit (else the 10 s one)
  uint32_t retry_after_s = 0;  // when refused: until the refusing window ends
  uint32_t count_10s = 0;      // this account's new orders in the current window, this one included
  uint32_t count_1d = 0;
};

// Binance counts new orders per account in fixed windows (10 s and a UTC
// day, from the epoch). A refused order is not counted.
class OrderCountLimiter {
 public:
  explicit OrderCountLimiter(OrderLimitOptions options);
  OrderCountDecision Take(uint64_t account, int64_t now_ms);

 private:
  struct Counts {
    int64_t window = -1;  // now_ms / 10000
    uint32_t in_window = 0;
    int64_t day = -1;  // now_ms / 86400000
    uint32_t in_day = 0;
  };
  struct Stripe {
    Mutex mu;
    std::unordered_map<uint64_t, Counts> counts MB_GUARDED_BY(mu);
  };
  OrderLimitOptions options_;
  std::array<Stripe, 16> stripes_;
};

}  // namespace mb::gateway
