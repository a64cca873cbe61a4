// The one shape of every long-lived worker thread (Aeron's agent): an Agent
// does a unit of work per call and says how much it did; an AgentRunner owns
// the thread, names and places it (StageConfig: name, CPU, scheduling class)
// and, when a round did nothing, idles it with the stage's wait strategy
// (concurrency/wait.h) until a producer calls Wake() or the park times out.
//
//   runner thread:  OnStart()
//                   loop: n = DoWork()
//                         n > 0           -> next round at once
//                         n == 0, stopped -> leave the loop
//                         n == 0          -> Idle (back-off: spin, yield,
//                                            park <= park_us unless HasWork())
//                   OnClose()
//
// Stop() drains: the loop ends at the first round that finds nothing to do,
// so work published before Stop() is done (an agent that must give up on
// work at shutdown checks its own flag inside DoWork).
//
// A periodic worker (a checkpointer every 200 ms, say) is an agent whose
// park_us is its period: DoWork finds the period elapsed after a park times
// out. The thread name is StageConfig::name, which is also the name the
// start-up log, `top -H` and the per-thread CPU metrics show.
//
// Thread safety: Start/Stop from the owning thread; Wake from any thread;
// the agent's own methods run on the runner's thread only (after Start, up
// to the return of Stop). work()/parks() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "concurrency/thread.h"
#include "concurrency/wait.h"

namespace mb::concurrency {

class Agent {
 public:
  virtual ~Agent() = default;
  // One round: returns how much work it did (0: none; the runner idles).
  virtual int DoWork() = 0;
  // Cheap and free of side effects: would DoWork find work now? The runner
  // asks after announcing a park, so work published as it was about to sleep
  // is never slept through (false is always safe with a bounded park).
  virtual bool HasWork() const { return false; }
  virtual void OnStart() {}
  virtual void OnClose() {}
};

// An agent made of callables: for an owner that runs several agents (one
// class can be only one Agent).
class FunctionAgent final : public Agent {
 public:
  explicit FunctionAgent(std::function<int()> work, std::function<bool()> has_work = {})
      : work_(std::move(work)), has_work_(std::move(has_work)) {}
  int DoWork() override { return work_(); }
  bool HasWork() const override { return has_work_ ? has_work_() : false; }

 private:
  const std::function<int()> work_;
  const std::function<bool()> has_work_;
};

class AgentRunner {
 public:
  // `agent` must outlive the runner (or its Stop()).
  AgentRunner(Agent* agent, StageConfig config);
  ~AgentRunner();
  AgentRunner(const AgentRunner&) = delete;
  AgentRunner& operator=(const AgentRunner&) = delete;

  // Starts the thread and returns once it runs: the start-up line, e.g.
  // "mb-projector: unpinned (numa node 0), SCHED_OTHER; back-off (spin 0,
  // yield 0, park <= 10000 us)". REQUIRES: not running.
  std::string Start();
  // Asks the loop to end at the first round that does no work, wakes it,
  // runs OnClose on the agent's thread and joins. Idempotent.
  void Stop();
  // Producers, after publishing work for the agent.
  void Wake() noexcept { waiter_.Wake(); }

  bool running() const noexcept { return running_.load(std::memory_order_acquire); }
  const StageConfig& config() const noexcept { return config_; }
  uint64_t work() const noexcept { return work_.load(std::memory_order_relaxed); }
  uint64_t parks() const noexcept { return waiter_.parks(); }

 private:
  void Run(std::string* line, std::atomic<bool>* started);

  Agent* const agent_;
  const StageConfig config_;
  Waiter waiter_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> work_{0};  // the runner writes; a gauge for tests and metrics
  std::thread thread_;
};

}  // namespace mb::concurrency
