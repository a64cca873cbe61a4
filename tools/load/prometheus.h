// The Prometheus text exposition format (version 0.0.4) as matchbook-load
// reads the target's GET /metrics: samples with their labels and values, and
// from them the serving process's CPU counters.
//
// Thread safety: pure functions over plain values.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace mb::load {

struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in exposition order, unescaped
  double value = 0;  // +Inf, -Inf and NaN as the doubles they name

  // The label's value, or nullptr when the sample has no such label.
  const std::string* Label(std::string_view key) const;
};

struct PromText {
  std::vector<PromSample> samples;
  // Lines that are neither comments, blank, nor a well-formed sample; they are
  // skipped so that one odd series never hides the others.
  std::size_t bad_lines = 0;
};

// Parses an exposition: `# ...` lines are comments (HELP and TYPE included);
// a sample is `name{label="value",...} value [timestamp]`, label values with
// the escapes \\, \" and \n, values in any of Go's float spellings (1e-3,
// +Inf, -Inf, NaN).
PromText ParsePromText(std::string_view text);

// One parsed sample line, or InvalidArgument saying what is wrong with it.
Result<PromSample> ParsePromSample(std::string_view line);

// The CPU counters of the process behind one /metrics answer.
struct ServerCpu {
  double process_seconds = 0;             // process_cpu_seconds_total
  std::map<std::string, double> threads;  // matchbook_thread_cpu_seconds_total by `thread`
};

// NotFound when the exposition has no finite process_cpu_seconds_total.
Result<ServerCpu> ServerCpuFrom(const PromText& text);

}  // namespace mb::load
