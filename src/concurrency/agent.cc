#include "concurrency/agent.h"

namespace mb::concurrency {

AgentRunner::AgentRunner(Agent* agent, StageConfig config)
    : agent_(agent), config_(std::move(config)), waiter_(config_.wait) {}

AgentRunner::~AgentRunner() { Stop(); }

std::string AgentRunner::Start() {
  std::string line;
  std::atomic<bool> started{false};
  stop_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this, &line, &started] { Run(&line, &started); });
  // The line is written before `started` is released (and read after).
  while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
  return line;
}

void AgentRunner::Run(std::string* line, std::atomic<bool>* started) {
  *line = ApplyToCurrentThread(config_) + "; " + Describe(config_.wait);
  running_.store(true, std::memory_order_release);
  started->store(true, std::memory_order_release);
  agent_->OnStart();
  for (;;) {
    const int n = agent_->DoWork();
    if (n > 0) {
      work_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
      waiter_.Reset();
      continue;
    }
    // Acquire: pairs with the store in Stop(). The round that just found
    // nothing may have looked before the stopping thread's last publication,
    // so once stopped, rounds go on until one finds nothing after the stop
    // was seen: everything published before Stop() is done.
    if (stop_.load(std::memory_order_acquire)) {
      for (int m = agent_->DoWork(); m > 0; m = agent_->DoWork()) {
        work_.fetch_add(static_cast<uint64_t>(m), std::memory_order_relaxed);
      }
      break;
    }
    waiter_.Idle([this] { return stop_.load(std::memory_order_acquire) || agent_->HasWork(); });
  }
  agent_->OnClose();
  running_.store(false, std::memory_order_release);
}

void AgentRunner::Stop() {
  if (!thread_.joinable()) return;
  // seq_cst, before the wake: either the runner's park announcement comes
  // first in the single total order (and the wake below finds it), or this
  // store does (and the runner's re-check before sleeping sees it).
  stop_.store(true, std::memory_order_seq_cst);
  waiter_.WakeAlways();
  thread_.join();
}

}  // namespace mb::concurrency
