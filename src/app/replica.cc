#include "app/replica.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "app/bus.h"
#include "bus/publisher.h"
#include "common/json_escape.h"
#include "gateway/forwarder.h"
#include "gateway/gateway.h"
#include "journal/data_dir.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "metrics/process.h"

namespace mb::app {
namespace {

// The follower's records into the gateway's read side and streams.
class GatewayFeed final : public bus::FollowerSink {
 public:
  explicit GatewayFeed(gateway::Gateway* gw) : gw_(gw) {}
  void Bootstrap(const engine::EngineImage& image) override { gw_->ReplicaBootstrap(image); }
  void Apply(std::span<const engine::Event> events) override { gw_->ReplicaApply(events); }
  void Tick() override { gw_->ReplicaTick(); }

 private:
  gateway::Gateway* const gw_;
};

}  // namespace

gateway::GatewayOptions ReplicaGatewayOptions(const Config& cfg, metrics::Registry* registry) {
  gateway::GatewayOptions go = cfg.runtime.gateway;
  go.metrics = registry;
  go.metrics_remote = cfg.runtime.metrics.remote;
  go.metrics_port = cfg.runtime.metrics.port;
  return go;
}

void AddReplicaMetrics(metrics::Registry& registry, const bus::Follower& follower) {
  const bus::Follower* f = &follower;
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  registry.AddGauge("matchbook_replica_applied_sequence",
                    "The last journal sequence this replica has applied", {},
                    [f, d] { return d(f->stats().applied_seq); });
  registry.AddGauge("matchbook_replica_lag_events",
                    "Records the bus stream holds that this replica has not applied yet", {},
                    [f, d] { return d(f->stats().lag_events); });
  registry.AddGauge("matchbook_replica_caught_up",
                    "1 once the replica has applied everything the stream held, else 0", {},
                    [f] { return f->stats().caught_up ? 1.0 : 0.0; });
  registry.AddGauge("matchbook_replica_boot_seconds",
                    "How long the last boot took (connect, snapshot, bootstrap)", {},
                    [f] { return f->stats().boot_seconds; });
  registry.AddCounterFn("matchbook_replica_records_total", "Journal records applied", {},
                        [f, d] { return d(f->stats().records); });
  registry.AddCounterFn("matchbook_replica_duplicates_total",
                        "Records received again and skipped (already applied)", {},
                        [f, d] { return d(f->stats().duplicates); });
  registry.AddCounterFn("matchbook_replica_resyncs_total",
                        "Boots from a snapshot after the first (a gap or a damaged record)", {},
                        [f, d] { return d(f->stats().resyncs); });
  registry.AddCounterFn("matchbook_replica_refused_messages_total",
                        "Bus messages refused and never applied: not signed with the venue's bus "
                        "key ([bus] verify_key)",
                        {}, [f, d] { return d(f->stats().refused); });
}

std::string ReplicaHealthJson(const bus::FollowerStats& s, const std::string& servers) {
  return fmt::format(
      R"({{"appliedSequence":{},"lagEvents":{},"streamSequence":{},"caughtUp":{},)"
      R"("connected":{},"lastError":{},"messages":{},"records":{},"duplicates":{},"resyncs":{},)"
      R"("refused":{},)"
      R"("snapshotSequence":{},"bootSeconds":{:.3f},"stream":{},"subject":{},"servers":{}}})",
      s.applied_seq, s.lag_events, s.stream_seq, s.caught_up, s.connected, JsonString(s.last_error),
      s.messages, s.records, s.duplicates, s.resyncs, s.refused, s.snapshot_seq, s.boot_seconds,
      JsonString(s.stream), JsonString(s.subject), JsonString(servers));
}

void ReloadTls(gateway::Gateway& gw) {
  if (!gw.tls()) {
    log::Warn("gateway", "SIGHUP: no TLS certificate to reload (--tls-cert, [tls])");
    return;
  }
  if (Status s = gw.ReloadTls(); !s.ok()) {
    log::Error("gateway", "SIGHUP: the TLS certificate was not reloaded, the one in use stays: " +
                              s.message());
    return;
  }
  log::Info("gateway", "SIGHUP: TLS certificate and key reloaded; new connections use them");
}

int RunReplica(const Config& cfg, const std::string& source, const std::string& primary,
               const std::string& primary_ca, const std::function<bool()>& stopping,
               const std::function<bool()>& reload_tls) {
  auto fail = [](const Status& s) {
    log::Error("app", s.message());
    return 1;
  };
  const std::string& nats = cfg.runtime.bus.nats;
  if (nats.empty())
    return fail(InvalidArgument("replica: --nats URL (the primary's NATS) is required"));
  auto servers = bus::ParseServers(nats);
  if (!servers.ok()) return fail(servers.status());
  if (!primary.empty()) {
    if (auto p = gateway::ParsePrimary(primary); !p.ok()) {
      return fail(Status(p.status().code(), "--primary: " + p.status().message()));
    }
  }
  auto verifier = LoadBusVerifier(cfg, nullptr);
  if (!verifier.ok()) return fail(verifier.status());
  if (Status s = bus::CheckNatsSecurity(cfg.runtime.bus.security); !s.ok()) return fail(s);
  log::Info("app", fmt::format("matchbook 0.1.0 replica: configuration {} ({} assets, {} markets)",
                               source, cfg.engine.assets.size(), cfg.engine.markets.size()));
  // The directory is the replica's alone: locked like a primary's, and never
  // a primary's (its snapshots would be the fetched ones').
  auto dir = journal::DataDir::Open(cfg.runtime.data_dir, journal::OpenMode::kReadWrite);
  if (!dir.ok()) return fail(dir.status());
  auto segments = dir->ListSegments();
  if (!segments.ok()) return fail(segments.status());
  if (!segments->empty()) {
    return fail(InvalidArgument(fmt::format(
        "{} holds a journal: it is a primary's data directory; give the replica one of its own "
        "(--data-dir)",
        cfg.runtime.data_dir)));
  }
  metrics::Registry registry;
  metrics::AddProcessMetrics(registry);
  auto gw = gateway::Gateway::Create(cfg.engine, cfg.runtime.data_dir,
                                     ReplicaGatewayOptions(cfg, &registry));
  if (!gw.ok()) return fail(gw.status());

  GatewayFeed feed(gw->get());
  bus::FollowerOptions fo = FollowerOptionsFrom(cfg, *servers, std::move(*verifier), "replica");
  bus::Follower follower(cfg.runtime.data_dir, cfg.engine, fo, &feed);
  AddReplicaMetrics(registry, follower);
  (*gw)->AddHealthSection("replica",
                          [&follower, nats] { return ReplicaHealthJson(follower.stats(), nats); });
  log::Info("replica", fmt::format("following NATS {}", nats));
  // Started before its primary (no stream yet, or no snapshot and the
  // stream no longer starts at record 1): it waits and says for what. NATS
  // unreachable, another venue or configuration: it stops.
  Status started = follower.Start();
  std::string waiting;
  while (!started.ok() && started.code() == StatusCode::kNotFound && !stopping()) {
    if (started.message() != waiting) log::Warn("replica", "waiting: " + started.message());
    waiting = started.message();
    for (int i = 0; i < 20 && !stopping(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    started = follower.Start();
  }
  if (stopping()) return 0;
  if (!started.ok()) return fail(started);
  gateway::ReplicaOptions ro;
  ro.primary = primary;
  ro.primary_ca = primary_ca;
  ro.ready = [&follower] {
    const bus::FollowerStats st = follower.stats();
    return st.caught_up && st.connected;
  };
  if (Status s = (*gw)->StartReplica(ro); !s.ok()) {
    follower.Stop();
    return fail(s);
  }
  const gateway::ServerOptions& so = cfg.runtime.gateway.server;
  const std::string api = ApiBase(so, (*gw)->port());
  if (const std::string w = PlaintextWarning(so); !w.empty()) log::Warn("gateway", w);
  log::Info("gateway", fmt::format("replica at {}/api/v3 (public market data and streams); "
                                   "private calls {}",
                                   api,
                                   primary.empty() ? std::string("refused (no --primary)")
                                                   : "forwarded to " + primary));
  // `ready` once everything the stream held at the start is applied.
  while (!stopping() && !follower.stats().caught_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!stopping()) {
    const bus::FollowerStats st = follower.stats();
    log::Info("replica", fmt::format("caught up at record {} ({:.3f} s boot)", st.applied_seq,
                                     st.boot_seconds));
    fmt::print("api: {}/api/v3\nws: {}/ws\nadmin token: {}\nready\n", api,
               ApiBase(so, (*gw)->port(), /*ws=*/true), (*gw)->admin_token_path().string());
    std::fflush(stdout);
  }
  while (!stopping()) {
    if (reload_tls()) ReloadTls(**gw);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  (*gw)->StopServer();
  follower.Stop();
  (*gw)->Stop();
  log::Info("replica", fmt::format("stopped at record {}", follower.stats().applied_seq));
  return 0;
}

}  // namespace mb::app
