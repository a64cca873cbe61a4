// The process's own resource use as Prometheus' standard process_* series,
// read from /proc/self at scrape time: resident and virtual memory, CPU time
// (user + system), open file descriptors, start time.
//
// Thread safety: the collector runs on the scraping thread; it only reads
// /proc.
#pragma once

#include <map>
#include <string>

#include "metrics/metrics.h"

namespace mb::metrics {

// Registers process_resident_memory_bytes, process_virtual_memory_bytes,
// process_cpu_seconds_total, process_open_fds, process_start_time_seconds and
// matchbook_thread_cpu_seconds_total{thread} (per thread name).
void AddProcessMetrics(Registry& registry);

// What the collector reports, read once (also for tests and tools).
struct ProcessSample {
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double cpu_seconds = 0;
  double open_fds = 0;
  double start_time_seconds = 0;  // since the epoch
};
ProcessSample ReadProcessSample();

// User + system CPU seconds of this process's threads, summed by thread name.
std::map<std::string, double> ThreadCpuSeconds();

}  // namespace mb::metrics
