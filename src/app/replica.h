// `matchbook replica`: a read replica of a primary that publishes its journal
// on NATS JetStream (docs/scale-out.md). The follower (bus/follower.h) boots
// it from the newest snapshot on the bus and feeds every later record to a
// gateway in replica mode (gateway/gateway.h, StartReplica), which serves the
// public market data and streams and forwards private calls to the primary.
//
// Thread safety: RunReplica runs on the main thread until `stopping` says so.
#pragma once

#include <functional>
#include <string>

#include "app/config.h"
#include "bus/follower.h"

namespace mb::metrics {
class Registry;
}

namespace mb::app {

// {"appliedSequence", "lagEvents", "streamSequence", "caughtUp", "connected",
//  "lastError", "messages", "records", "duplicates", "resyncs",
//  "snapshotSequence", "bootSeconds", "stream", "subject", "servers"}
std::string ReplicaHealthJson(const bus::FollowerStats& stats, const std::string& servers);

// A gateway of the replica kind (a replica's or a standby's), registering
// its metrics in `registry`.
gateway::GatewayOptions ReplicaGatewayOptions(const Config& config, metrics::Registry* registry);

// The follower's figures as matchbook_replica_* metrics.
void AddReplicaMetrics(metrics::Registry& registry, const bus::Follower& follower);

// Serves until stopping() is true (checked every 50 ms); 0, or 1 after
// logging why it could not start.
// primary_ca: the CA that checks an https:// primary's certificate ("": the
// system's). reload_tls: true once per SIGHUP (the certificate is read again).
int RunReplica(const Config& config, const std::string& source, const std::string& primary,
               const std::string& primary_ca, const std::function<bool()>& stopping,
               const std::function<bool()>& reload_tls);

// SIGHUP: the API's certificate and key read again, the outcome logged.
void ReloadTls(gateway::Gateway& gw);

}  // namespace mb::app
