// Latency histogram of matchbook-load: the server's log-linear layout
// (metrics/log_linear.h) with 128 sub-buckets per power of two, so a value is
// known to within 0.8 % of itself, from 1 ns to 2^36 ns (~69 s). The load
// generator reports percentiles to a thousandth of a millisecond against
// targets of 1-5 ms, so it keeps a finer resolution than the server's
// Prometheus histograms need, and the exact maximum.
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

#include "metrics/log_linear.h"

namespace mb::load {

class Histogram {
 public:
  using Layout = metrics::LogLinear<7, 36>;
  static constexpr std::size_t kBuckets = Layout::kBuckets;

  struct Snapshot {
    std::array<uint64_t, kBuckets> counts{};
    uint64_t count = 0;
    uint64_t max_ns = 0;

    // The value at quantile q in [0, 1]: the bucket's upper bound, capped at
    // the exact maximum (0 when empty).
    uint64_t Quantile(double q) const noexcept {
      return std::min(Layout::Quantile(counts, count, q, max_ns), max_ns);
    }
    // this - earlier, for the interval between two snapshots of one
    // histogram; the maximum is the highest non-empty bucket's bound.
    Snapshot Since(const Snapshot& earlier) const noexcept {
      Snapshot d;
      for (std::size_t b = 0; b < kBuckets; ++b) {
        d.counts[b] = counts[b] - earlier.counts[b];
        if (d.counts[b] != 0) d.max_ns = std::min(Layout::UpperBound(b), max_ns);
      }
      d.count = count - earlier.count;
      return d;
    }
  };

  void Record(uint64_t ns) noexcept {
    counts_[Layout::BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
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
