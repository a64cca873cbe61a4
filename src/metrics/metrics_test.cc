// Histogram layout and quantiles, concurrent recording, the allocation-free
// Record(), and the exact text of an exposition (checked by promtool when it
// is installed).
#include "metrics/metrics.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <thread>

#include "common/counting_new.h"
#include "metrics/process.h"

namespace mb::metrics {
namespace {

constexpr uint64_t kTop = uint64_t{1} << Histogram::kMaxPow2;

void CheckValue(uint64_t v) {
  const std::size_t b = Histogram::BucketOf(v);
  ASSERT_LT(b, Histogram::kBuckets) << v;
  const uint64_t lo = Histogram::LowerBound(b);
  const uint64_t hi = Histogram::UpperBound(b);
  ASSERT_LE(lo, v) << "bucket " << b;
  ASSERT_LE(v, hi) << "bucket " << b;
  // 12.5 % resolution: the bucket is no wider than an eighth of its values.
  ASSERT_LE(hi - v, std::max<uint64_t>(1, v / 8)) << v;
  ASSERT_LE(hi - lo + 1, std::max<uint64_t>(2, lo / 8)) << "bucket " << b;
}

TEST(Histogram, BucketsAreContiguousAndIncreasing) {
  EXPECT_EQ(Histogram::LowerBound(0), 0u);
  EXPECT_EQ(Histogram::UpperBound(0), 1u);
  EXPECT_EQ(Histogram::UpperBound(Histogram::kBuckets - 1), kTop);
  for (std::size_t b = 1; b < Histogram::kBuckets; ++b) {
    ASSERT_EQ(Histogram::LowerBound(b), Histogram::UpperBound(b - 1) + 1) << b;
    ASSERT_LE(Histogram::LowerBound(b), Histogram::UpperBound(b)) << b;
    ASSERT_EQ(Histogram::BucketOf(Histogram::LowerBound(b)), b);
    ASSERT_EQ(Histogram::BucketOf(Histogram::UpperBound(b)), b);
  }
  // Values from 2 to 9 ns have a bucket each.
  for (uint64_t v = 2; v <= 9; ++v) {
    EXPECT_EQ(Histogram::LowerBound(Histogram::BucketOf(v)), v);
    EXPECT_EQ(Histogram::UpperBound(Histogram::BucketOf(v)), v);
  }
}

TEST(Histogram, EveryValueLiesInItsBucketWithinAnEighth) {
  for (uint64_t v = 0; v <= 1000; ++v) CheckValue(v);
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200'000; ++i) {
    // Log-uniform over 1 ns .. 2^35 ns.
    const int bits = static_cast<int>(rng() % Histogram::kMaxPow2) + 1;
    const uint64_t v = 1 + (rng() & ((uint64_t{1} << bits) - 1));
    CheckValue(std::min(v, kTop));
  }
  EXPECT_EQ(Histogram::BucketOf(kTop + 1), Histogram::kBuckets - 1);
  EXPECT_EQ(Histogram::BucketOf(std::numeric_limits<uint64_t>::max()), Histogram::kBuckets - 1);
}

// The load generator's layout: 128 sub-buckets per power of two (0.8 %).
TEST(LogLinear, FineLayoutIsContiguousWithinAHundredTwentyEighth) {
  using Fine = LogLinear<7, 36>;
  EXPECT_EQ(Fine::kBuckets, 128u * 30u);
  EXPECT_EQ(Fine::UpperBound(Fine::kBuckets - 1), uint64_t{1} << 36);
  for (std::size_t b = 1; b < Fine::kBuckets; ++b) {
    ASSERT_EQ(Fine::LowerBound(b), Fine::UpperBound(b - 1) + 1) << b;
    ASSERT_EQ(Fine::BucketOf(Fine::LowerBound(b)), b);
    ASSERT_EQ(Fine::BucketOf(Fine::UpperBound(b)), b);
    const uint64_t lo = Fine::LowerBound(b);
    ASSERT_LE(Fine::UpperBound(b) - lo + 1, std::max<uint64_t>(2, lo / 128)) << b;
  }
  // 1,000..10,000 us uniform: p99 within 0.8 % above the true 9,910 us.
  std::vector<uint64_t> counts(Fine::kBuckets);
  for (uint64_t us = 1000; us <= 10000; ++us) ++counts[Fine::BucketOf(us * 1000)];
  const uint64_t p99 = Fine::Quantile(counts, 9001, 0.99, 0);
  EXPECT_GE(p99, 9'910'000u);
  EXPECT_LE(p99, 9'910'000u + 9'910'000u / 128);
  EXPECT_EQ(Fine::Quantile(counts, 0, 0.5, 7), 0u);
  EXPECT_EQ(Fine::Quantile(counts, 10'000, 1.0, 7), 7u);  // counts short of the total
}

TEST(Histogram, ExposedBoundsAreBucketEdges) {
  const auto& bounds = Registry::ExposedBounds();
  ASSERT_EQ(bounds.size(), 57u);
  EXPECT_EQ(bounds.front(), 64u);
  EXPECT_EQ(bounds[1], 96u);
  EXPECT_EQ(bounds.back(), uint64_t{1} << 34);
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(bounds[i - 1], bounds[i]);
    }
    EXPECT_EQ(Histogram::UpperBound(Histogram::BucketOf(bounds[i])), bounds[i]) << bounds[i];
  }
}

TEST(Histogram, QuantilesOfUniformData) {
  Histogram h;
  uint64_t sum = 0;
  for (uint64_t us = 1; us <= 10'000; ++us) {
    h.Record(us * 1000);
    sum += us * 1000;
  }
  const Histogram::Snapshot s = h.Collect();
  EXPECT_EQ(s.count, 10'000u);
  EXPECT_EQ(s.sum_ns, sum);
  auto near = [](uint64_t got, double want) {
    return std::fabs(static_cast<double>(got) - want) <= want / 8;
  };
  EXPECT_PRED2(near, s.Quantile(0.5), 5'000'000.0);
  EXPECT_PRED2(near, s.Quantile(0.99), 9'900'000.0);
  EXPECT_GE(s.Quantile(0.5), 5'000'000u);
  EXPECT_GE(s.Quantile(0.99), 9'900'000u);
  EXPECT_GE(s.Quantile(1.0), 10'000'000u);
  EXPECT_EQ(s.Quantile(1.0), s.max_ns);
  EXPECT_PRED2(near, s.max_ns, 10'000'000.0);
  EXPECT_GE(s.Quantile(0.0), 1000u);
  EXPECT_LE(s.Quantile(0.0), 1125u);

  EXPECT_EQ(Histogram::Snapshot{}.Quantile(0.5), 0u);

  Histogram other;
  other.Record(20'000'000'000);  // 20 s
  Histogram::Snapshot merged = s;
  merged.Merge(other.Collect());
  EXPECT_EQ(merged.count, 10'001u);
  EXPECT_EQ(merged.sum_ns, sum + 20'000'000'000);
  EXPECT_GE(merged.max_ns, 20'000'000'000u);
  EXPECT_EQ(merged.Quantile(0.5), s.Quantile(0.5));

  h.Reset();
  EXPECT_EQ(h.Collect().count, 0u);
  EXPECT_EQ(h.Collect().sum_ns, 0u);
}

TEST(Histogram, RecordDeltaCountsNegativeAsZero) {
  Histogram h;
  h.RecordDelta(-5);
  h.RecordDelta(7);
  const auto s = h.Collect();
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.sum_ns, 7u);
  EXPECT_EQ(s.counts[Histogram::BucketOf(0)], 1u);
}

TEST(Histogram, ConcurrentRecordsAreAllCounted) {
  Registry registry;
  Histogram& h = registry.AddHistogram("test_latency_seconds", "Latency.");
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 1'000'000;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    uint64_t last = 0;
    while (!done.load(std::memory_order_acquire)) {
      const uint64_t now = h.Collect().count;
      EXPECT_GE(now, last);  // counts only grow
      last = now;
      EXPECT_NE(registry.Expose().find("test_latency_seconds_count"), std::string::npos);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&h, t] {
      for (uint64_t i = 0; i < kPerThread; ++i)
        h.Record((i % 100'000) * 37 + static_cast<uint64_t>(t));
    });
  }
  for (auto& w : writers) w.join();
  done.store(true, std::memory_order_release);
  reader.join();

  uint64_t want_sum = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (uint64_t i = 0; i < kPerThread; ++i)
      want_sum += (i % 100'000) * 37 + static_cast<uint64_t>(t);
  }
  const auto s = h.Collect();
  EXPECT_EQ(s.count, kThreads * kPerThread);
  EXPECT_EQ(s.sum_ns, want_sum);
}

TEST(Histogram, RecordAllocatesNothing) {
  Histogram h;
  Counter c;
  for (uint64_t i = 0; i < 1000; ++i) h.Record(i);  // this thread's shard is assigned
  const long before = mb::testing::g_allocations.load();
  for (uint64_t i = 0; i < 100'000; ++i) {
    h.Record(i * 977);
    h.RecordDelta(static_cast<int64_t>(i) - 50);
    c.Inc();
  }
  EXPECT_EQ(mb::testing::g_allocations.load() - before, 0);
  EXPECT_EQ(h.Collect().count, 201'000u);
  EXPECT_EQ(c.value(), 100'000u);
}

// ---- exposition ----

std::string Bucket(std::string_view labels, uint64_t edge_ns, uint64_t count) {
  return fmt::format("test_latency_seconds_bucket{{{}le=\"{}\"}} {}\n", labels,
                     static_cast<double>(edge_ns) / 1e9, count);
}

TEST(Registry, ExposesTheExactText) {
  Registry r;
  Counter& btc = r.AddCounter("test_orders_total", "Orders accepted.", {{"market", "BTCUSDT"}});
  Counter& odd = r.AddCounter("test_orders_total", "Orders accepted.", {{"market", "a\"b\\c\nd"}});
  r.AddGauge("test_ring_depth", "Commands waiting\\queued\non the ring.", {}, [] { return 7.0; });
  Histogram& h = r.AddHistogram("test_latency_seconds", "Latency.", {{"stage", "match"}});
  r.AddCounterFn("test_journal_bytes_total", "Journal bytes.", {}, [] { return 1.5e12; });
  r.AddGauge("test_ratio", "A fraction.", {{"a", "1"}, {"b", "2"}}, [] { return 0.25; });
  r.AddGauge("test_ratio", "A fraction.", {{"a", "3"}, {"b", "4"}},
             [] { return std::numeric_limits<double>::quiet_NaN(); });
  r.AddCollector([](SampleWriter& w) {
    w.Family("test_market_open_orders", "Open orders per market.", "gauge");
    w.Family("test_market_trades_total", "Trades per market.", "counter");
    w.Sample("test_market_open_orders", {{"market", "BTCUSDT"}}, 12);
    w.Sample("test_market_trades_total", {{"market", "BTCUSDT"}}, 99);
    w.Sample("test_market_open_orders", {{"market", "ETHUSDT"}}, 3);
  });
  btc.Inc(3);
  odd.Inc();
  // The same series registered twice is the same counter.
  EXPECT_EQ(&r.AddCounter("test_orders_total", "Orders accepted.", {{"market", "BTCUSDT"}}), &btc);
  h.Record(50);
  h.Record(128);  // exactly on an edge: counted at le=1.28e-07
  h.Record(2000);

  std::string want =
      "# HELP test_orders_total Orders accepted.\n"
      "# TYPE test_orders_total counter\n"
      "test_orders_total{market=\"BTCUSDT\"} 3\n"
      "test_orders_total{market=\"a\\\"b\\\\c\\nd\"} 1\n"
      "# HELP test_ring_depth Commands waiting\\\\queued\\non the ring.\n"
      "# TYPE test_ring_depth gauge\n"
      "test_ring_depth 7\n"
      "# HELP test_latency_seconds Latency.\n"
      "# TYPE test_latency_seconds histogram\n";
  const uint64_t values[] = {50, 128, 2000};
  for (uint64_t edge : Registry::ExposedBounds()) {
    const auto n =
        std::count_if(std::begin(values), std::end(values), [&](uint64_t v) { return v <= edge; });
    want += Bucket("stage=\"match\",", edge, static_cast<uint64_t>(n));
  }
  want +=
      "test_latency_seconds_bucket{stage=\"match\",le=\"+Inf\"} 3\n"
      "test_latency_seconds_sum{stage=\"match\"} 2.178e-06\n"
      "test_latency_seconds_count{stage=\"match\"} 3\n"
      "# HELP test_journal_bytes_total Journal bytes.\n"
      "# TYPE test_journal_bytes_total counter\n"
      "test_journal_bytes_total 1500000000000\n"
      "# HELP test_ratio A fraction.\n"
      "# TYPE test_ratio gauge\n"
      "test_ratio{a=\"1\",b=\"2\"} 0.25\n"
      "# HELP test_market_open_orders Open orders per market.\n"
      "# TYPE test_market_open_orders gauge\n"
      "test_market_open_orders{market=\"BTCUSDT\"} 12\n"
      "test_market_open_orders{market=\"ETHUSDT\"} 3\n"
      "# HELP test_market_trades_total Trades per market.\n"
      "# TYPE test_market_trades_total counter\n"
      "test_market_trades_total{market=\"BTCUSDT\"} 99\n";
  const std::string got = r.Expose();
  EXPECT_EQ(got, want);
  // Spot checks of the edges' spelling, independent of fmt.
  EXPECT_NE(got.find("test_latency_seconds_bucket{stage=\"match\",le=\"6.4e-08\"} 1\n"),
            std::string::npos);
  EXPECT_NE(got.find("test_latency_seconds_bucket{stage=\"match\",le=\"1.28e-07\"} 2\n"),
            std::string::npos);
  EXPECT_NE(got.find("test_latency_seconds_bucket{stage=\"match\",le=\"2.048e-06\"} 3\n"),
            std::string::npos);
  EXPECT_NE(got.find("le=\"17.179869184\"} 3\n"), std::string::npos);
}

// The numbers after the last space of each line starting with `prefix`.
std::vector<uint64_t> Values(const std::string& text, std::string_view prefix) {
  std::vector<uint64_t> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(prefix)) continue;
    out.push_back(std::stoull(line.substr(line.rfind(' ') + 1)));
  }
  return out;
}

TEST(Registry, HistogramBucketsAreCumulative) {
  Registry r;
  Histogram& h = r.AddHistogram("test_latency_seconds", "Latency.");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 50'000; ++i) h.Record(rng() % 40'000'000'000);  // up to 40 s
  const std::string text = r.Expose();
  const auto buckets = Values(text, "test_latency_seconds_bucket");
  const auto count = Values(text, "test_latency_seconds_count");
  ASSERT_EQ(buckets.size(), Registry::ExposedBounds().size() + 1);
  ASSERT_EQ(count.size(), 1u);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
  EXPECT_EQ(buckets.back(), count[0]);
  EXPECT_EQ(count[0], 50'000u);
  EXPECT_LT(buckets[buckets.size() - 2], count[0]);  // values above 17 s exist
}

TEST(Registry, RegistersWhileExposing) {
  Registry r;
  std::atomic<bool> done{false};
  std::size_t exposed = 0;
  std::thread exposer([&] {
    while (!done.load(std::memory_order_acquire)) exposed += r.Expose().size();
  });
  for (int i = 0; i < 200; ++i) {
    r.AddCounter("test_things_total", "Things.", {{"i", std::to_string(i)}}).Inc();
    r.AddHistogram(fmt::format("test_h{}_seconds", i), "H.").Record(1);
  }
  done.store(true, std::memory_order_release);
  exposer.join();
  EXPECT_EQ(Values(r.Expose(), "test_things_total{").size(), 200u);
  EXPECT_EQ(Values(r.Expose(), "test_h199_seconds_count").size(), 1u);
  (void)exposed;
}

TEST(RegistryDeathTest, RejectsBadNames) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Registry r;
  EXPECT_DEATH(r.AddCounter("bad name_total", "x"), "invalid metric name");
  EXPECT_DEATH(r.AddCounter("1abc_total", "x"), "invalid metric name");
  EXPECT_DEATH(r.AddCounter("test_orders", "x"), "_total");
  EXPECT_DEATH(r.AddHistogram("test_h_seconds", "x", {{"le", "1"}}), "reserved");
  EXPECT_DEATH(r.AddGauge("test_g", "x", {{"bad-label", "1"}}, [] { return 1.0; }),
               "invalid label name");
  r.AddGauge("test_g", "x", {}, [] { return 1.0; });
  EXPECT_DEATH(r.AddHistogram("test_g", "x"), "registered as gauge and as histogram");
  EXPECT_DEATH(r.AddGauge("test_g", "x", {}, [] { return 2.0; }), "registered twice");
}

// promtool's linter over an exposition with every kind of series.
TEST(Registry, PromtoolAcceptsTheExposition) {
  if (::access("/usr/bin/promtool", X_OK) != 0 && std::system("command -v promtool >/dev/null")) {
    GTEST_SKIP() << "promtool is not installed";
  }
  Registry r;
  r.AddCounter("test_orders_total", "Orders accepted.", {{"market", "BTC\"USDT\\x\ny"}}).Inc(5);
  r.AddCounter("test_orders_total", "Orders accepted.", {{"market", "ETHUSDT"}}).Inc(2);
  r.AddGauge("test_ring_depth", "Commands waiting\non the ring.", {}, [] { return 0.5; });
  r.AddCounterFn("test_journal_bytes_total", "Journal bytes.", {}, [] { return 123.0; });
  for (const char* stage : {"match", "journal"}) {
    Histogram& h = r.AddHistogram("test_latency_seconds", "Latency.", {{"stage", stage}});
    for (uint64_t v = 1; v < 40'000'000'000; v = v * 3 + 7) h.Record(v);
  }
  r.AddCollector([](SampleWriter& w) {
    w.Family("test_market_trades_total", "Trades per market.", "counter");
    w.Sample("test_market_trades_total", {{"market", "BTCUSDT"}}, 99);
    w.Sample("test_market_trades_total", {{"market", "ETHUSDT"}}, 1);
  });
  const auto path = std::filesystem::temp_directory_path() /
                    fmt::format("mb-metrics-promtool-{}.txt", ::getpid());
  {
    std::ofstream out(path);
    out << r.Expose();
  }
  const std::string cmd = fmt::format("promtool check metrics < '{}' 2>&1", path.string());
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) output += buf;
  const int status = ::pclose(p);
  std::filesystem::remove(path);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "");
}

// The process series follow what the process does: memory it touches shows
// in the resident size, CPU it burns in the CPU time, a file it opens in the
// descriptors.
TEST(ProcessMetrics, FollowWhatTheProcessDoes) {
  const ProcessSample a = ReadProcessSample();
  EXPECT_GT(a.resident_bytes, 0);
  EXPECT_GE(a.virtual_bytes, a.resident_bytes);
  EXPECT_GT(a.open_fds, 2);
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(a.start_time_seconds, now + 1);
  EXPECT_GT(a.start_time_seconds, now - 3600) << "this test process started within the hour";

  std::vector<char> touched(64 << 20);
  for (std::size_t i = 0; i < touched.size(); i += 4096) touched[i] = 1;
  // Burn CPU until the kernel's own account (getrusage) shows 0.15 s more,
  // however busy the machine is.
  volatile uint64_t spin = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto own_cpu = [] {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  };
  const double cpu0 = own_cpu();
  while (own_cpu() - cpu0 < 0.15 && std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < 100000; ++i) spin = spin + 1;
  }
  std::ifstream held("/proc/self/stat");
  const ProcessSample b = ReadProcessSample();
  EXPECT_GE(b.resident_bytes - a.resident_bytes, 60 << 20);
  EXPECT_GE(b.cpu_seconds - a.cpu_seconds, 0.1);
  EXPECT_GE(b.open_fds, a.open_fds + 1);
  // This thread's CPU shows under its name.
  char thread[16] = {};
  pthread_getname_np(pthread_self(), thread, sizeof thread);
  EXPECT_GE(ThreadCpuSeconds()[thread], 0.15) << thread;

  Registry r;
  AddProcessMetrics(r);
  const std::string text = r.Expose();
  for (const char* name :
       {"process_resident_memory_bytes ", "process_virtual_memory_bytes ",
        "process_cpu_seconds_total ", "process_open_fds ", "process_start_time_seconds ",
        "matchbook_thread_cpu_seconds_total{thread=\""}) {
    EXPECT_NE(text.find(std::string("\n") + name), std::string::npos) << name << "\n" << text;
  }
}

}  // namespace
}  // namespace mb::metrics
