// The load run of matchbook-load: set-up through the operator API (accounts,
// API keys, deposits, a seeded book), then orders at a constant arrival rate
// over a pool of keep-alive HTTP connections while WebSocket subscribers
// measure trade delivery and depth freshness.
//
// Open loop (k6 "constant-arrival-rate"): iteration i is due at start + i /
// rate; a sender wakes every 100-200 us and sends every due iteration on an
// idle connection; with none idle the iteration is dropped, never sent late.
// Order latency is response complete - intended send time, so queueing in the
// load generator counts against the server (no coordinated omission).
//
// Thread safety: RunLoad() is called once, from the main thread; it runs the
// io threads itself and joins them before returning. StopRequested() may be
// set from a signal handler.
#pragma once

#include <atomic>

#include "common/status.h"
#include "load/options.h"
#include "load/report.h"

namespace mb::load {

// Set by SIGINT: the run ends early with a report of what was measured.
extern std::atomic<bool> g_stop_requested;

// Set-up failures (unreachable target, bad token, unknown symbol) return an
// error (exit 1). A run that ends early (server gone, SIGINT) returns a
// report whose `aborted` says why.
Result<Report> RunLoad(const Options& options);

}  // namespace mb::load
