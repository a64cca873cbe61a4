// CPU time of this process's threads by name, from /proc: what the
// benchmarks report as "CPU per order" for each stage, a figure that does not
// depend on what the machine's other tenants are doing.
//
// Thread safety: plain functions.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace mb::bench {

// Time a task spent runnable but waiting for a CPU (schedstat's second field).
inline double RunQueueWaitSeconds(const std::filesystem::path& schedstat) {
  std::ifstream f(schedstat);
  double on_cpu = 0, wait = 0;
  if (f >> on_cpu >> wait) return wait / 1e9;
  return 0;
}

// CPU time of this process's threads, by thread name: user + system, and
// system alone under "<name>/sys"; "<name>/wait": runnable but not running
// (waiting for a CPU); "<name>/vcsw": voluntary context switches (parks,
// sleeps, blocking syscalls).
inline std::map<std::string, double> ThreadCpuSeconds() {
  std::map<std::string, double> out;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream f(e.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const auto open = line.find('(');
    const auto close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::string name = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 2));
    std::string tok;
    double ut = 0, st = 0;
    for (int field = 3; rest >> tok; ++field) {
      if (field == 14) ut = std::strtod(tok.c_str(), nullptr);
      if (field == 15) {
        st = std::strtod(tok.c_str(), nullptr);
        break;
      }
    }
    out[name] += (ut + st) / tick;
    out[name + "/sys"] += st / tick;
    out[name + "/wait"] += RunQueueWaitSeconds(e.path() / "schedstat");
    std::ifstream status(e.path() / "status");
    while (std::getline(status, line)) {
      if (line.starts_with("voluntary_ctxt_switches:")) {
        out[name + "/vcsw"] += std::strtod(line.c_str() + 24, nullptr);
      }
    }
  }
  return out;
}

// The CPU seconds of threads named `name` in a ThreadCpuSeconds() result (0
// when there is none, e.g. a backend without that thread).
inline double CpuOf(const std::map<std::string, double>& cpu, const std::string& name) {
  auto it = cpu.find(name);
  return it == cpu.end() ? 0.0 : it->second;
}

}  // namespace mb::bench
