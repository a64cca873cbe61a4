// The journal publisher (bus/publisher.h) as `serve` runs it: its options
// from [bus] and the venue, its metrics, and its object in /admin/v1/health.
//
// Thread safety: BusHealthJson and the metrics read the publisher's stats()
// (any thread); the rest runs on the starting thread.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/config.h"
#include "bus/follower.h"
#include "bus/publisher.h"
#include "bus/signing.h"
#include "fanout/stage.h"
#include "metrics/metrics.h"

namespace mb::app {

// REQUIRES: servers parsed from config.runtime.bus.nats.
bus::PublisherOptions BusOptionsFrom(const Config& config, std::vector<std::string> servers);

// The bus key's file: [bus] signing_key_file, or <data_dir>/bus.key.
std::filesystem::path SigningKeyFile(const Config& config);

// The venue's bus signer. create: a missing key file is made (a primary's
// first start); a standby is given the primary's, so its must exist.
Result<std::shared_ptr<const bus::BusSigner>> LoadBusSigner(const Config& config, bool create);

// What a follower verifies with: [bus] verify_key, else the signer's public
// half (a standby); both given, they must be one key. Neither: an error
// naming [bus] verify_key and --bus-verify-key.
Result<std::shared_ptr<const bus::BusVerifier>> LoadBusVerifier(const Config& config,
                                                                const bus::BusSigner* signer);

// [bus] as a replica's or a standby's follower takes it.
bus::FollowerOptions FollowerOptionsFrom(const Config& config, std::vector<std::string> servers,
                                         std::shared_ptr<const bus::BusVerifier> verifier,
                                         std::string_view log_name);

// matchbook_bus_* gauges and counters.
void AddBusMetrics(metrics::Registry& registry, const bus::Publisher& publisher);

// {"stream", "subject", "servers", "publishedSequence", "durableSequence",
//  "lagEvents", "connected", "healthy", "lastError", "messages", "records", "bytes", "errors",
//  "snapshotSequence"}
std::string BusHealthJson(const bus::PublisherStats& stats, const std::string& servers);

// `ack = replicated` (docs/failover.md): the first handler of the fan-out
// stage. Each batch waits until the stream has acknowledged its last record,
// so the read side, the streams and every answer after it only ever show
// what a quorum of the JetStream cluster holds. It also tells the publisher
// everything durable (`durable`: the exchange's durable sequence), so one
// message carries what several batches hold.
//
// While NATS cannot take records the stage waits — the journal then waits
// for the stage and intake refuses with 503 once the ring is full: nothing
// is answered that is not replicated. Abandon() (after the server has
// stopped answering) ends a wait without delivering anything to a client.
class ReplicationGate final : public fanout::Handler {
 public:
  ReplicationGate(bus::Publisher* publisher, std::function<uint64_t()> durable)
      : publisher_(publisher), durable_(std::move(durable)) {}
  void OnBatch(const fanout::Batch& batch, bool end_of_batch) override;
  void Abandon() noexcept { abandoned_.store(true, std::memory_order_release); }
  uint64_t waits() const noexcept { return waits_.load(std::memory_order_relaxed); }

 private:
  bus::Publisher* const publisher_;
  const std::function<uint64_t()> durable_;
  std::atomic<bool> abandoned_{false};
  std::atomic<uint64_t> waits_{0};
};

}  // namespace mb::app
