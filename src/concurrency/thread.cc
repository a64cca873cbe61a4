#include "concurrency/thread.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace mb::concurrency {

int NumaNodeOfCpu(int cpu) {
  if (cpu < 0) return -1;
  std::error_code ec;
  const std::filesystem::path dir = fmt::format("/sys/devices/system/cpu/cpu{}", cpu);
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4) return std::atoi(name.c_str() + 4);
  }
  return -1;
}

std::string DescribeNumaTopology() {
  std::error_code ec;
  std::string out;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() <= 4 || !std::isdigit(name[4])) continue;
    std::ifstream in(entry.path() / "cpulist");
    std::string cpus;
    std::getline(in, cpus);
    if (!out.empty()) out += "; ";
    out += fmt::format("{}: cpus {}", name, cpus);
  }
  return out.empty() ? "no NUMA information" : out;
}

std::string ApplyToCurrentThread(const StageConfig& config) {
  std::string warnings;
  const std::string name = config.name.substr(0, 15);
  pthread_setname_np(pthread_self(), name.c_str());

  std::string placement = "unpinned";
  if (config.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (config.cpu < CPU_SETSIZE) CPU_SET(static_cast<std::size_t>(config.cpu), &set);
    if (config.cpu < CPU_SETSIZE && sched_setaffinity(0, sizeof(set), &set) == 0) {
      placement = fmt::format("cpu {}", config.cpu);
    } else {
      warnings +=
          fmt::format("; WARNING: pinning to cpu {} refused: {}", config.cpu, std::strerror(errno));
    }
  }
  const int cpu_now = sched_getcpu();
  const int node = NumaNodeOfCpu(config.cpu >= 0 ? config.cpu : cpu_now);

  std::string policy = "SCHED_OTHER";
  if (config.realtime) {
    sched_param param{};
    param.sched_priority = config.rt_priority;
    const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
    if (rc == 0) {
      policy = fmt::format("SCHED_FIFO {}", config.rt_priority);
    } else {
      warnings += fmt::format("; WARNING: SCHED_FIFO {} refused ({}), running SCHED_OTHER",
                              config.rt_priority, std::strerror(rc));
    }
  }
  if (!config.realtime && config.background_nice > 0) {
    sched_param param{};
    const int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
    const auto tid = static_cast<id_t>(syscall(SYS_gettid));
    if (rc == 0 && setpriority(PRIO_PROCESS, tid, config.background_nice) == 0) {
      policy = fmt::format("SCHED_BATCH nice {}", config.background_nice);
    } else {
      warnings += fmt::format("; WARNING: background scheduling refused ({})",
                              std::strerror(rc != 0 ? rc : errno));
    }
  }
  return fmt::format("{}: {} (numa node {}), {}{}", name, placement,
                     node < 0 ? std::string("?") : std::to_string(node), policy, warnings);
}

}  // namespace mb::concurrency
