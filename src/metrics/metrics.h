// Metrics: latency histograms, counters and gauges, exposed in the
// Prometheus text format (version 0.0.4).
//
// Histogram: log-linear buckets of nanosecond durations (log_linear.h, with
// kSubBits = 3): a value is known to within 12.5 % of itself, from 1 ns up to
// 2^kMaxPow2 ns (~34 s; larger values land in the last bucket), and every
// exposed `le` edge is a bucket's upper bound, so the cumulative counts are
// exact (values <= le). Record() is a handful of
// instructions: the bucket index from the highest set bit, then a relaxed
// fetch_add on the calling thread's own shard (threads are spread over
// kShards cache-line-separated shards by a thread-local index), so threads
// never share a cache line unless more than kShards of them record into one
// histogram. No lock, no allocation, no system call.
//
// Registry: named families, each a counter, a gauge or a histogram, with
// optional constant labels per series. Counters and histograms live in the
// registry (stable addresses: hand the reference to the hot path once);
// gauges are read by a callback at scrape time; a collector callback adds
// series whose label sets are only known at scrape time (per market counts).
// Expose() writes every family in registration order: # HELP, # TYPE, then
// the samples; a histogram's buckets are cumulative with `le` in seconds at
// the edges listed by ExposedBounds() (two per power of two: 2^k and
// 1.5 * 2^k ns for k = 6..33, then 2^34 ns, i.e. 64 ns .. ~17 s; then +Inf),
// plus _sum (seconds) and _count. Series of one name share one HELP/TYPE
// block, whether registered or written by collectors. A NaN value (a gauge
// callback's) is not written.
//
// Thread safety: Record/Add/Inc from any thread at any time. Add*() from any
// thread (a mutex guards the family list; registration is a cold path).
// Expose() and Collect() from any thread, concurrently with recording and
// with each other.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics/log_linear.h"

namespace mb::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Histogram {
 public:
  static constexpr int kSubBits = 3;
  static constexpr int kMaxPow2 = 35;
  using Layout = LogLinear<kSubBits, kMaxPow2>;
  static constexpr std::size_t kBuckets = Layout::kBuckets;
  static constexpr std::size_t kShards = 16;

  // The bucket a value falls in, and the smallest and largest value of a bucket.
  static std::size_t BucketOf(uint64_t ns) noexcept { return Layout::BucketOf(ns); }
  static uint64_t UpperBound(std::size_t bucket) noexcept { return Layout::UpperBound(bucket); }
  static uint64_t LowerBound(std::size_t bucket) noexcept { return Layout::LowerBound(bucket); }

  // Any thread; see the header comment.
  void Record(uint64_t ns) noexcept;
  // A signed difference of two clock readings: negative values count as 0.
  void RecordDelta(int64_t ns) noexcept { Record(ns > 0 ? static_cast<uint64_t>(ns) : 0); }

  struct Snapshot {
    std::array<uint64_t, kBuckets> counts{};
    uint64_t count = 0;
    uint64_t sum_ns = 0;
    uint64_t max_ns = 0;  // the upper bound of the highest non-empty bucket
    // The value at quantile q in [0, 1] (a bucket's upper bound, so never
    // below the true value; 0 when empty).
    uint64_t Quantile(double q) const noexcept;
    void Merge(const Snapshot& other) noexcept;
  };
  // Sums the shards. Concurrent records may be partly seen.
  Snapshot Collect() const noexcept;
  void Reset() noexcept;  // tests and benchmark phases; not concurrent with Record

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, kBuckets> counts{};
    std::atomic<uint64_t> sum_ns{0};
  };
  std::unique_ptr<Shard[]> shards_ = std::make_unique<Shard[]>(kShards);
};

class Counter {
 public:
  void Inc(uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<uint64_t> value_{0};
};

// Writes samples of families a collector adds at scrape time. Samples are
// grouped under their family's HELP/TYPE block whatever the order of the calls
// (and with the samples other collectors write under the same name).
class SampleWriter {
 public:
  // Declares a family (once per name per scrape); type is "counter" or "gauge".
  // A bad name or type is a bug: the process aborts with a message.
  virtual void Family(std::string_view name, std::string_view help, std::string_view type) = 0;
  // A sample of a declared family (an undeclared name is written as untyped).
  virtual void Sample(std::string_view name, const Labels& labels, double value) = 0;

 protected:
  ~SampleWriter() = default;
};

// A family with a single unlabelled sample: declares it and writes the value.
inline void WriteSingle(SampleWriter& w, std::string_view name, std::string_view help,
                        std::string_view type, double value) {
  w.Family(name, help, type);
  w.Sample(name, {}, value);
}

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*); a counter's name
  // ends in _total; label names are [a-zA-Z_][a-zA-Z0-9_]*, not starting with
  // "__" (and not "le" on a histogram). Several series of one family: the same
  // name and help with different labels. REQUIRES: a name is registered with
  // one type only. A broken rule is a bug: the process aborts with a message.
  // AddCounter/AddHistogram with a name and labels already registered return
  // the same object; a gauge or counter callback registered twice aborts.
  Counter& AddCounter(std::string_view name, std::string_view help, Labels labels = {});
  Histogram& AddHistogram(std::string_view name, std::string_view help, Labels labels = {});
  void AddGauge(std::string_view name, std::string_view help, Labels labels,
                std::function<double()> read);
  // A counter whose value is read at scrape time (a component's own atomic).
  void AddCounterFn(std::string_view name, std::string_view help, Labels labels,
                    std::function<double()> read);
  void AddCollector(std::function<void(SampleWriter&)> collect);

  // The text exposition of every series.
  std::string Expose() const;

  // Edges (ns) at which Expose() writes a histogram's cumulative buckets.
  static const std::vector<uint64_t>& ExposedBounds();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The text format's content type.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace mb::metrics
