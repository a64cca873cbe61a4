// The journal publisher (bus/publisher.h) as `serve` runs it: its options
// from [bus] and the venue, its metrics, and its object in /admin/v1/health.
//
// Thread safety: BusHealthJson and the metrics read the publisher's stats()
// (any thread); the rest runs on the starting thread.
#pragma once

#include <string>
#include <vector>

#include "app/config.h"
#include "bus/publisher.h"
#include "metrics/metrics.h"

namespace mb::app {

// REQUIRES: servers parsed from config.runtime.bus.nats.
bus::PublisherOptions BusOptionsFrom(const Config& config, std::vector<std::string> servers);

// matchbook_bus_* gauges and counters.
void AddBusMetrics(metrics::Registry& registry, const bus::Publisher& publisher);

// {"stream", "subject", "servers", "publishedSequence", "durableSequence",
//  "lagEvents", "connected", "healthy", "lastError", "messages", "records", "bytes", "errors",
//  "snapshotSequence"}
std::string BusHealthJson(const bus::PublisherStats& stats, const std::string& servers);

}  // namespace mb::app
