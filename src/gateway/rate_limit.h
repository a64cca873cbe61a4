// Request-weight limits: a token bucket per API key and per IP, and the used
// weight of the current minute for the X-MBX-USED-WEIGHT-1M header.
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

}  // namespace mb::gateway
