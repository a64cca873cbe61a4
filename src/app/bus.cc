#include "app/bus.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "common/json_escape.h"

namespace mb::app {

bus::PublisherOptions BusOptionsFrom(const Config& config, std::vector<std::string> servers) {
  const BusConfig& b = config.runtime.bus;
  bus::PublisherOptions o;
  o.servers = std::move(servers);
  o.venue = config.runtime.venue;
  o.stream = b.stream;
  o.subject = b.subject;
  o.replicas = static_cast<int>(b.replicas);
  o.keep_more_replicas = !b.replicas_set;
  o.max_bytes = static_cast<int64_t>(b.max_mb) << 20;
  o.max_age = std::chrono::hours(b.max_age_hours);
  o.message_bytes = std::size_t{b.message_kb} << 10;
  o.linger = std::chrono::microseconds(b.linger_us);
  o.timeout = std::chrono::milliseconds(b.timeout_ms);
  o.sync_journal = config.runtime.journal.policy == journal::FsyncPolicy::kNone;
  return o;
}

void AddBusMetrics(metrics::Registry& registry, const bus::Publisher& publisher) {
  const bus::Publisher* p = &publisher;
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  registry.AddGauge("matchbook_bus_published_sequence",
                    "The last journal sequence the bus stream is known to hold", {},
                    [p, d] { return d(p->stats().published_seq); });
  registry.AddGauge("matchbook_bus_lag_events",
                    "Durable journal records the bus stream has not acknowledged yet", {},
                    [p, d] { return d(p->stats().lag_events); });
  registry.AddGauge("matchbook_bus_snapshot_sequence",
                    "The sequence of the newest engine snapshot on the bus (0: none yet)", {},
                    [p, d] { return d(p->stats().snapshot_seq); });
  registry.AddGauge("matchbook_bus_connected", "1 when the last call to NATS succeeded, else 0", {},
                    [p] { return p->stats().connected ? 1.0 : 0.0; });
  registry.AddCounterFn("matchbook_bus_messages_total", "Messages the bus stream acknowledged", {},
                        [p, d] { return d(p->stats().messages); });
  registry.AddCounterFn("matchbook_bus_records_total",
                        "Journal records the bus stream acknowledged", {},
                        [p, d] { return d(p->stats().records); });
  registry.AddCounterFn("matchbook_bus_bytes_total", "Message bytes the bus stream acknowledged",
                        {}, [p, d] { return d(p->stats().bytes); });
  registry.AddCounterFn("matchbook_bus_errors_total",
                        "Failed calls to NATS (connect, stream, publish) and refusals", {},
                        [p, d] { return d(p->stats().errors); });
}

std::string BusHealthJson(const bus::PublisherStats& s, const std::string& servers) {
  return fmt::format(
      R"({{"stream":{},"subject":{},"servers":{},"publishedSequence":{},"durableSequence":{},)"
      R"("lagEvents":{},"connected":{},"healthy":{},"lastError":{},"messages":{},"records":{},)"
      R"("bytes":{},"errors":{},"snapshotSequence":{}}})",
      JsonString(s.stream), JsonString(s.subject), JsonString(servers), s.published_seq,
      s.durable_seq, s.lag_events, s.connected, s.connected && s.last_error.empty(),
      JsonString(s.last_error), s.messages, s.records, s.bytes, s.errors, s.snapshot_seq);
}

void ReplicationGate::OnBatch(const fanout::Batch& batch, bool /*end_of_batch*/) {
  if (batch.events.empty()) return;
  const uint64_t last = static_cast<uint64_t>(batch.events.back().seq);
  publisher_->NotifyDurable(std::max(last, durable_()));
  if (publisher_->stats().published_seq >= last) return;
  waits_.fetch_add(1, std::memory_order_relaxed);
  while (!publisher_->WaitPublished(last, std::chrono::milliseconds(100))) {
    if (abandoned_.load(std::memory_order_acquire)) return;
  }
}

}  // namespace mb::app
