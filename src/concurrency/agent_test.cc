// The agent shape: a runner calls DoWork on its own named thread until it is
// stopped, idles by its wait strategy when a round did nothing, and is woken
// by a producer's Wake() long before its park would time out.
#include "concurrency/agent.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace mb::concurrency {
namespace {

// Takes items a producer posts; counts what each hook saw.
class Counter final : public Agent {
 public:
  int DoWork() override {
    const uint64_t posted = posted_.load(std::memory_order_acquire);
    const uint64_t taken = taken_.load(std::memory_order_relaxed);
    rounds_.fetch_add(1, std::memory_order_relaxed);
    if (posted == taken) return 0;
    taken_.store(posted, std::memory_order_release);
    return static_cast<int>(posted - taken);
  }
  bool HasWork() const override {
    return posted_.load(std::memory_order_acquire) != taken_.load(std::memory_order_relaxed);
  }
  void OnStart() override {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    std::lock_guard lock(mu_);
    start_thread_ = name;
    started_ = true;
  }
  void OnClose() override {
    std::lock_guard lock(mu_);
    closed_ = true;
  }

  void Post() { posted_.fetch_add(1, std::memory_order_release); }
  uint64_t taken() const { return taken_.load(std::memory_order_acquire); }
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }
  std::string start_thread() const {
    std::lock_guard lock(mu_);
    return start_thread_;
  }
  bool started() const {
    std::lock_guard lock(mu_);
    return started_;
  }
  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }

 private:
  std::atomic<uint64_t> posted_{0}, taken_{0}, rounds_{0};
  mutable std::mutex mu_;
  std::string start_thread_;
  bool started_ = false, closed_ = false;
};

template <class Pred>
bool WaitUntil(Pred pred, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

StageConfig Parking(std::string name, uint32_t park_us) {
  StageConfig c;
  c.name = std::move(name);
  c.wait = WaitConfig{WaitKind::kBackOff, 0, 0, park_us};
  return c;
}

TEST(AgentRunner, RunsTheAgentOnItsNamedThreadUntilStopped) {
  Counter agent;
  AgentRunner runner(&agent, Parking("mb-test-agent", 1000));
  const std::string line = runner.Start();
  EXPECT_TRUE(runner.running());
  EXPECT_NE(line.find("mb-test-agent"), std::string::npos) << line;
  EXPECT_NE(line.find("back-off"), std::string::npos) << line;
  ASSERT_TRUE(WaitUntil([&] { return agent.started(); }, std::chrono::seconds(5)));
  EXPECT_EQ(agent.start_thread(), "mb-test-agent");
  for (int i = 0; i < 1000; ++i) {
    agent.Post();
    runner.Wake();
  }
  ASSERT_TRUE(WaitUntil([&] { return agent.taken() == 1000; }, std::chrono::seconds(5)));
  EXPECT_EQ(runner.work(), 1000u) << "the runner counts what DoWork reported";
  // Work posted right before Stop() is done before the loop ends.
  for (int i = 0; i < 10; ++i) agent.Post();
  runner.Stop();
  EXPECT_EQ(agent.taken(), 1010u) << "Stop() drains";
  EXPECT_FALSE(runner.running());
  EXPECT_TRUE(agent.closed()) << "OnClose ran before Stop returned";
  runner.Stop();  // idempotent
}

// Parked for up to 10 s at a time, the agent is woken by Wake(): items posted
// while it sleeps are taken far sooner than its park would end, and Stop()
// does not wait for the park either.
TEST(AgentRunner, WakeAndStopDoNotWaitForThePark) {
  Counter agent;
  AgentRunner runner(&agent, Parking("mb-test-park", 10'000'000));
  runner.Start();
  ASSERT_TRUE(WaitUntil([&] { return runner.parks() >= 1; }, std::chrono::seconds(5)))
      << "an idle agent parks";
  for (int round = 1; round <= 5; ++round) {
    const uint64_t parks = runner.parks();
    agent.Post();
    runner.Wake();
    EXPECT_TRUE(WaitUntil([&] { return agent.taken() == static_cast<uint64_t>(round); },
                          std::chrono::seconds(5)))
        << "round " << round << ": woken by Wake(), not by the 10 s park";
    ASSERT_TRUE(WaitUntil([&] { return runner.parks() > parks; }, std::chrono::seconds(5)))
        << "round " << round << ": parked again once the work was done";
  }
  const auto before = std::chrono::steady_clock::now();
  runner.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  EXPECT_TRUE(agent.closed());
}

// With nothing to do and a short park, the runner keeps calling DoWork (a
// periodic agent's timer) but parks between rounds instead of spinning.
TEST(AgentRunner, AnIdleAgentParksBetweenRounds) {
  Counter agent;
  AgentRunner runner(&agent, Parking("mb-test-idle", 2000));
  runner.Start();
  ASSERT_TRUE(WaitUntil([&] { return agent.rounds() >= 20; }, std::chrono::seconds(10)));
  runner.Stop();
  EXPECT_GE(runner.parks() + 1, agent.rounds() - 1) << "one park per idle round";
  EXPECT_EQ(runner.work(), 0u);
}

// Work published after a round looked and found nothing, then Stop(): the
// runner sees the stop after that empty round and must still do the work
// (the stop's last rounds look again), not leave it behind.
TEST(AgentRunner, StopDoesWorkPublishedAfterTheLastEmptyRound) {
  class Gated final : public Agent {
   public:
    int DoWork() override {
      const uint64_t posted = posted_.load(std::memory_order_acquire);
      if (posted == taken_.load(std::memory_order_relaxed)) {
        // An empty round, held open until the test has published and stopped.
        if (hold_.exchange(false)) {
          in_empty_round_.store(true);
          while (!release_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return 0;
      }
      taken_.store(posted, std::memory_order_release);
      return 1;
    }
    std::atomic<uint64_t> posted_{0}, taken_{0};
    std::atomic<bool> hold_{false}, in_empty_round_{false}, release_{false};
  } agent;
  AgentRunner runner(&agent, Parking("mb-gated", 1'000));
  runner.Start();
  agent.hold_.store(true);
  runner.Wake();
  ASSERT_TRUE(WaitUntil([&] { return agent.in_empty_round_.load(); }, std::chrono::seconds(5)));
  agent.posted_.fetch_add(1, std::memory_order_release);  // after the round looked
  std::thread stopper([&] { runner.Stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // Stop() has asked by now
  agent.release_.store(true);
  stopper.join();
  EXPECT_EQ(agent.taken_.load(), 1u);
}

}  // namespace
}  // namespace mb::concurrency
