#include "app/bus.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "common/json_escape.h"
#include "log/log.h"

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
  o.security = b.security;
  return o;
}

std::filesystem::path SigningKeyFile(const Config& config) {
  const std::string& file = config.runtime.bus.signing_key_file;
  return file.empty() ? std::filesystem::path(config.runtime.data_dir) / "bus.key"
                      : std::filesystem::path(file);
}

Result<std::shared_ptr<const bus::BusSigner>> LoadBusSigner(const Config& config, bool create) {
  const std::filesystem::path file = SigningKeyFile(config);
  auto key = bus::LoadSigningKey(file, create);
  if (!key.ok()) {
    if (key.status().code() == StatusCode::kNotFound) {
      return NotFound(fmt::format(
          "{}: a standby signs the journal once it takes over, so it needs the primary's bus "
          "key: copy <primary data_dir>/bus.key to {} (mode 0600) or name it with "
          "--bus-signing-key / [bus] signing_key_file",
          key.status().message(), file.string()));
    }
    return key.status();
  }
  return std::make_shared<const bus::BusSigner>(std::move(*key));
}

Result<std::shared_ptr<const bus::BusVerifier>> LoadBusVerifier(const Config& config,
                                                                const bus::BusSigner* signer) {
  std::string raw;
  if (!config.runtime.bus.verify_key.empty()) {
    auto parsed = bus::ParseVerifyKey(config.runtime.bus.verify_key);
    if (!parsed.ok()) return parsed.status();
    raw = std::move(*parsed);
    if (signer != nullptr && raw != signer->public_key()) {
      return InvalidArgument(fmt::format(
          "[bus] verify_key {} is not the public half of the signing key {} ({})", HexEncode(raw),
          SigningKeyFile(config).string(), HexEncode(signer->public_key())));
    }
  } else if (signer != nullptr) {
    raw = signer->public_key();
  } else {
    return InvalidArgument(
        "[bus] verify_key is not set: a replica applies only records signed with the venue's bus "
        "key; give it the primary's public key (--bus-verify-key HEX|FILE, the 64 hex characters "
        "of <primary data_dir>/bus.key.pub)");
  }
  auto key = Ed25519PublicKey::FromRaw(raw);
  if (!key.ok()) return key.status();
  return std::make_shared<const bus::BusVerifier>(std::move(*key));
}

bus::FollowerOptions FollowerOptionsFrom(const Config& config, std::vector<std::string> servers,
                                         std::shared_ptr<const bus::BusVerifier> verifier,
                                         std::string_view log_name) {
  bus::FollowerOptions fo;
  fo.servers = std::move(servers);
  fo.security = config.runtime.bus.security;
  fo.verifier = std::move(verifier);
  fo.venue = config.runtime.venue;
  fo.stream = config.runtime.bus.stream;
  fo.subject = config.runtime.bus.subject;
  fo.timeout = std::chrono::milliseconds(config.runtime.bus.timeout_ms);
  fo.log = log::Sink(std::string(log_name));
  return fo;
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
  registry.AddCounterFn("matchbook_bus_forged_erased_total",
                        "Messages at the stream's end neither signed with the bus key nor this "
                        "journal's, erased by the publisher",
                        {}, [p, d] { return d(p->stats().forged_erased); });
}

std::string BusHealthJson(const bus::PublisherStats& s, const std::string& servers) {
  return fmt::format(
      R"({{"stream":{},"subject":{},"servers":{},"publishedSequence":{},"durableSequence":{},)"
      R"("lagEvents":{},"connected":{},"healthy":{},"lastError":{},"messages":{},"records":{},)"
      R"("bytes":{},"errors":{},"forgedErased":{},"snapshotSequence":{}}})",
      JsonString(s.stream), JsonString(s.subject), JsonString(servers), s.published_seq,
      s.durable_seq, s.lag_events, s.connected, s.connected && s.last_error.empty(),
      JsonString(s.last_error), s.messages, s.records, s.bytes, s.errors, s.forged_erased,
      s.snapshot_seq);
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
