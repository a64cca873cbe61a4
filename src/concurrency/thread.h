// Per-stage thread settings: name, wait strategy, CPU pinning, real-time
// priority — and the one line per stage that start-up prints about them.
//
// Thread safety: ApplyToCurrentThread() changes only the calling thread.
#pragma once

#include <string>

#include "concurrency/wait.h"

namespace mb::concurrency {

struct StageConfig {
  std::string name;       // thread name (at most 15 characters are kept)
  WaitConfig wait;        // what the stage does when idle
  int cpu = -1;           // pin to this CPU; -1: let the scheduler place it
  bool realtime = false;  // ask for SCHED_FIFO
  int rt_priority = 10;   // SCHED_FIFO priority (1..99) when realtime
  // A background stage (snapshots): SCHED_BATCH at this nice value, so the
  // latency-critical stages take the CPU first when it is short. 0: not.
  int background_nice = 0;
};

// Names the calling thread, pins it and sets its scheduling class as `config`
// says. Never fails: what the system refuses is reported in the returned line
// as a warning ("pinning to CPU 7 refused: Invalid argument"), and the thread
// runs unpinned / at normal priority.
// Returns e.g. "mb-engine: cpu 1 (numa node 0), SCHED_OTHER" (the caller adds
// how the stage waits: the wait strategy is applied by the stage's loop).
std::string ApplyToCurrentThread(const StageConfig& config);

// The NUMA node of a CPU from sysfs; -1 when unknown.
int NumaNodeOfCpu(int cpu);
// "node0: cpus 0-1" lines, or "no NUMA information" on machines without sysfs nodes.
std::string DescribeNumaTopology();

}  // namespace mb::concurrency
