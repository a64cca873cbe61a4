// What one matchbook-load run measured, and its three renderings: a human
// summary table, one JSON object (the interface external checks read) and an
// SVG chart (latency percentiles; p50/p99 over time).
//
// Thread safety: plain values; the writers are pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "load/histogram.h"

namespace mb::load {

// Percentiles of one histogram, in milliseconds.
struct Figures {
  uint64_t count = 0;
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0, p999 = 0, max = 0;
  static Figures From(const Histogram::Snapshot& s);
};

// One second of the run.
struct SecondPoint {
  double t_s = 0;   // end of the second, from the start of the load
  double rate = 0;  // responses in that second
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

// One step of the `max` search.
struct Step {
  double rate = 0;      // offered orders/s
  double achieved = 0;  // responses/s
  uint64_t requests = 0, errors = 0, dropped = 0;
  Figures order;
  bool pass = false;
  // The server's process CPU over the step / the step's answers, in us; unset
  // when the target's /metrics could not be read.
  std::optional<double> server_cpu_us_per_order;
};

// One server thread's CPU over the measured window.
struct ServerThreadCpu {
  double cpu_seconds = 0;
  std::optional<double> us_per_order;  // unset when nothing was answered
};

struct Report {
  std::string preset, symbol;
  double rate = 0;  // offered (max: the best passing step's)
  double duration_s = 0;
  uint64_t requests = 0;                           // sent
  uint64_t responses = 0;                          // answered (any status)
  uint64_t errors = 0;                             // non-2xx answers and failed requests
  std::map<std::string, uint64_t> errors_by_code;  // "503/-1008", "transport/<what>"
  uint64_t dropped = 0;                            // iterations with no idle connection
  double achieved_rate_per_s = 0;
  Figures order, delivery, freshness;
  int history_readers = 0;
  Figures history;  // allOrders / myTrades answers (200 only)
  uint64_t history_errors = 0;
  int subscribers = 0;
  uint64_t subscriber_drops = 0;
  uint64_t messages = 0;
  double loadgen_cpu_percent = 0;
  // The serving process's CPU (its /metrics, scraped right before the first
  // order and right after the last answer), apart from the load generator's
  // own. Unset, with server_cpu_warning saying why, when /metrics could not
  // be read.
  std::optional<double> server_cpu_seconds;         // process_cpu_seconds_total, after - before
  std::optional<double> server_cpu_window_s;        // wall time between the two scrapes
  std::optional<double> server_cpu_us_per_order;    // / orders answered in the window
  std::optional<double> server_cpu_ns_per_message;  // / messages_delivered; unset without any
  std::map<std::string, ServerThreadCpu> server_threads;  // by thread name
  std::optional<std::string> server_cpu_warning;
  uint64_t messages_delivered = 0;  // messages the subscribers received in the window
  int threads = 0, connections = 0, accounts = 0;
  std::optional<std::string> aborted;
  std::vector<SecondPoint> series;
  std::vector<Step> steps;
};

std::string ToJson(const Report& r);
std::string HumanSummary(const Report& r);
std::string ToSvg(const Report& r);
// Writes load-<preset>.json and load-<preset>.svg into dir (created if missing).
Status WriteFiles(const Report& r, const std::string& dir);

}  // namespace mb::load
