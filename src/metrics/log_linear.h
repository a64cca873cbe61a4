// The bucket layout of a log-linear histogram of nanosecond values
// (HdrHistogram's): values up to 2^SubBits ns have a bucket each; above, every
// power of two is split into 2^SubBits equal sub-buckets, so a value is known
// to within 1/2^SubBits of itself, up to 2^MaxPow2 ns (larger values land in
// the last bucket). Buckets are closed at their top — bucket b holds
// (UpperBound(b-1), UpperBound(b)] and bucket 0 holds 0 and 1 — so every
// power of two and every 1.5 x power of two is an upper bound, the edges a
// Prometheus histogram exposes.
//
// The server's histograms (metrics.h, 8 sub-buckets: 12.5 %) and the load
// generator's (128 sub-buckets: 0.8 %) share this layout and its quantile.
//
// Thread safety: stateless.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace mb::metrics {

template <int SubBits, int MaxPow2>
struct LogLinear {
  static_assert(SubBits >= 1 && SubBits < MaxPow2 && MaxPow2 < 63);
  static constexpr uint64_t kSub = uint64_t{1} << SubBits;
  static constexpr std::size_t kBuckets =
      static_cast<std::size_t>(kSub) + static_cast<std::size_t>(MaxPow2 - SubBits) * kSub;

  static constexpr std::size_t BucketOf(uint64_t ns) noexcept {
    const uint64_t x = ns - (ns != 0);  // closed at the top
    if (x < kSub) return static_cast<std::size_t>(x);
    const int p = 63 - std::countl_zero(x);  // the highest set bit, >= SubBits
    if (p >= MaxPow2) return kBuckets - 1;
    const uint64_t sub = (x >> (p - SubBits)) & (kSub - 1);
    return (static_cast<std::size_t>(p - SubBits + 1) << SubBits) + static_cast<std::size_t>(sub);
  }
  // The largest value of a bucket.
  static constexpr uint64_t UpperBound(std::size_t bucket) noexcept { return Start(bucket + 1); }
  // The smallest value of a bucket.
  static constexpr uint64_t LowerBound(std::size_t bucket) noexcept {
    return bucket == 0 ? 0 : Start(bucket) + 1;
  }

  // The upper bound of the bucket holding the value of rank ceil(q x total)
  // (q clamped to [0, 1]): never below the true quantile. 0 when total is 0;
  // `fallback` when the counts add up to less than total (a snapshot taken
  // while values were being recorded).
  static uint64_t Quantile(std::span<const uint64_t> counts, uint64_t total, double q,
                           uint64_t fallback) noexcept {
    if (total == 0) return 0;
    const double want = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(total));
    const uint64_t rank =
        std::clamp<uint64_t>(std::isnan(want) ? 1 : static_cast<uint64_t>(want), 1, total);
    uint64_t seen = 0;
    for (std::size_t b = 0; b < counts.size(); ++b) {
      seen += counts[b];
      if (seen >= rank) return UpperBound(b);
    }
    return fallback;
  }

 private:
  // The first value of bucket b in the layout closed at the bottom; bucket
  // kBuckets starts at 2^MaxPow2.
  static constexpr uint64_t Start(std::size_t b) noexcept {
    if (b < kSub) return b;
    const int p = static_cast<int>(b >> SubBits) + SubBits - 1;
    const uint64_t sub = b & (kSub - 1);
    return (uint64_t{1} << p) + (sub << (p - SubBits));
  }
};

}  // namespace mb::metrics
