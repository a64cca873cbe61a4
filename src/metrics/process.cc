#include "metrics/process.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace mb::metrics {

ProcessSample ReadProcessSample() {
  ProcessSample s;
  const auto page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  const auto tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  {
    std::ifstream statm("/proc/self/statm");
    double size = 0, resident = 0;
    if (statm >> size >> resident) {
      s.virtual_bytes = size * page;
      s.resident_bytes = resident * page;
    }
  }
  std::string line;
  {
    std::ifstream stat("/proc/self/stat");
    std::getline(stat, line);
  }
  // Fields after the command name (which may hold spaces): state is field 3.
  const auto close = line.rfind(')');
  double start_ticks = 0;
  if (close != std::string::npos) {
    std::istringstream rest(line.substr(close + 2));
    std::string tok;
    for (int field = 3; rest >> tok; ++field) {
      if (field == 14 || field == 15) s.cpu_seconds += std::strtod(tok.c_str(), nullptr) / tick;
      if (field == 22) {
        start_ticks = std::strtod(tok.c_str(), nullptr);
        break;
      }
    }
  }
  {
    std::ifstream stat("/proc/stat");
    while (std::getline(stat, line)) {
      if (line.starts_with("btime ")) {
        s.start_time_seconds = std::strtod(line.c_str() + 6, nullptr) + start_ticks / tick;
        break;
      }
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    s.open_fds += 1;
  }
  return s;
}

std::map<std::string, double> ThreadCpuSeconds() {
  std::map<std::string, double> out;
  const auto tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::ifstream f(it->path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const auto open = line.find('(');
    const auto close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string tok;
    double ticks = 0;
    for (int field = 3; rest >> tok; ++field) {
      if (field == 14 || field == 15) ticks += std::strtod(tok.c_str(), nullptr);
      if (field == 15) break;
    }
    out[line.substr(open + 1, close - open - 1)] += ticks / tick;
  }
  return out;
}

void AddProcessMetrics(Registry& registry) {
  registry.AddCollector([](SampleWriter& w) {
    const ProcessSample s = ReadProcessSample();
    const auto one = [&w](std::string_view name, std::string_view help, std::string_view type,
                          double v) { WriteSingle(w, name, help, type, v); };
    one("process_resident_memory_bytes", "Resident memory size in bytes", "gauge",
        s.resident_bytes);
    one("process_virtual_memory_bytes", "Virtual memory size in bytes", "gauge", s.virtual_bytes);
    one("process_cpu_seconds_total", "Total user and system CPU time spent in seconds", "counter",
        s.cpu_seconds);
    one("process_open_fds", "Number of open file descriptors", "gauge", s.open_fds);
    one("process_start_time_seconds", "Start time of the process since unix epoch in seconds",
        "gauge", s.start_time_seconds);
    // Per thread, by the names the threads give themselves (the agents'
    // StageConfig names, mb-io-N, ...): the same names as the start-up log.
    constexpr std::string_view kThreadCpu = "matchbook_thread_cpu_seconds_total";
    w.Family(kThreadCpu, "User and system CPU time of the process's threads, by thread name",
             "counter");
    for (const auto& [name, secs] : ThreadCpuSeconds())
      w.Sample(kThreadCpu, {{"thread", name}}, secs);
  });
}

}  // namespace mb::metrics
