// Latency histogram of matchbook-load: log-linear buckets of nanosecond
// values (HdrHistogram's layout). Values below 2^kSubBits ns have a bucket
// each; above, every power of two is split into 2^kSubBits equal sub-buckets,
// so a recorded value is known to within 1/2^kSubBits (0.8 %) of itself, from
// 1 ns to 2^kMaxPow2 ns (~69 s; larger values land in the last bucket). The
// load generator reports percentiles to a tenth of a millisecond, so it keeps
// a finer resolution than the server's Prometheus histograms need.
//
// Thread safety: Record() from any thread at any time (relaxed atomic adds;
// the exact maximum by a CAS loop). Collect() from any thread, concurrently
// with recording; a concurrent record may be partly seen. Snapshot is a plain
// value.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace mb::load {

class Histogram {
 public:
  static constexpr int kSubBits = 7;
  static constexpr int kMaxPow2 = 36;
  static constexpr std::size_t kSub = std::size_t{1} << kSubBits;
  static constexpr std::size_t kBuckets =
      kSub + static_cast<std::size_t>(kMaxPow2 - kSubBits) * kSub;

  static std::size_t BucketOf(uint64_t ns) noexcept {
    if (ns < kSub) return static_cast<std::size_t>(ns);
    const int msb = 63 - std::countl_zero(ns);  // >= kSubBits
    const int shift = msb - kSubBits;
    const std::size_t sub = static_cast<std::size_t>(ns >> shift) - kSub;
    const std::size_t b = kSub + static_cast<std::size_t>(shift) * kSub + sub;
    return std::min(b, kBuckets - 1);
  }
  // The largest value a bucket holds.
  static uint64_t UpperBound(std::size_t bucket) noexcept {
    if (bucket < kSub) return bucket;
    const std::size_t shift = (bucket - kSub) / kSub;
    const uint64_t sub = (bucket - kSub) % kSub + kSub;
    return ((sub + 1) << shift) - 1;
  }

  struct Snapshot {
    std::array<uint64_t, kBuckets> counts{};
    uint64_t count = 0;
    uint64_t max_ns = 0;

    // The value at quantile q in [0, 1]: the bucket's upper bound, capped at
    // the exact maximum (0 when empty).
    uint64_t Quantile(double q) const noexcept {
      if (count == 0) return 0;
      const double want = q * static_cast<double>(count);
      uint64_t rank = static_cast<uint64_t>(want);
      if (static_cast<double>(rank) < want) ++rank;
      rank = std::clamp<uint64_t>(rank, 1, count);
      uint64_t seen = 0;
      for (std::size_t b = 0; b < kBuckets; ++b) {
        seen += counts[b];
        if (seen >= rank) return std::min(UpperBound(b), max_ns);
      }
      return max_ns;
    }
    // this - earlier, for the interval between two snapshots of one
    // histogram; the maximum is the highest non-empty bucket's bound.
    Snapshot Since(const Snapshot& earlier) const noexcept {
      Snapshot d;
      for (std::size_t b = 0; b < kBuckets; ++b) {
        d.counts[b] = counts[b] - earlier.counts[b];
        if (d.counts[b] != 0) d.max_ns = std::min(UpperBound(b), max_ns);
      }
      d.count = count - earlier.count;
      return d;
    }
  };

  void Record(uint64_t ns) noexcept {
    counts_[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    uint64_t cur = max_ns_.load(std::memory_order_relaxed);
    while (ns > cur && !max_ns_.compare_exchange_weak(cur, ns, std::memory_order_relaxed)) {
    }
  }
  void RecordDelta(int64_t ns) noexcept { Record(ns > 0 ? static_cast<uint64_t>(ns) : 0); }

  // Boxed: a snapshot is 30 KB.
  std::unique_ptr<Snapshot> Collect() const {
    auto s = std::make_unique<Snapshot>();
    for (std::size_t b = 0; b < kBuckets; ++b) {
      s->counts[b] = counts_[b].load(std::memory_order_relaxed);
      s->count += s->counts[b];
    }
    s->max_ns = max_ns_.load(std::memory_order_relaxed);
    return s;
  }
  uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> counts_ =
      std::make_unique<std::atomic<uint64_t>[]>(kBuckets);
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> max_ns_{0};
};

}  // namespace mb::load
