// The fan-out stage: handlers see every durable batch in order, then the
// batch's answers get their own command's events; a full ring holds the
// producer back without losing a batch; Stop() delivers what was published.
#include "fanout/stage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mb::fanout {
namespace {

using engine::Event;

// Deposits standing in for a command's events: `n` events of command `seq`.
void AddCommand(std::vector<Event>* out, uint64_t seq, int n) {
  for (int i = 0; i < n; ++i) {
    engine::Deposited d;
    d.amount = Amount{static_cast<int64_t>(seq * 100 + static_cast<uint64_t>(i))};
    out->emplace_back(Sequence{seq}, 0, d);
  }
}

// Everything the stage did, in the order it did it (one mutex: the test
// reads it from its own thread).
struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  void Add(std::string s) {
    std::lock_guard lock(mu);
    lines.push_back(std::move(s));
  }
  std::vector<std::string> Get() {
    std::lock_guard lock(mu);
    return lines;
  }
};

class Recorder final : public Handler {
 public:
  Recorder(std::string name, Log* log) : name_(std::move(name)), log_(log) {}
  void OnBatch(const Batch& b, bool end_of_batch) override {
    std::string s = name_ + " batch";
    for (const Event& e : b.events) s += " " + std::to_string(static_cast<uint64_t>(e.seq));
    if (end_of_batch) s += " end";
    log_->Add(std::move(s));
  }

 private:
  const std::string name_;
  Log* const log_;
};

class Request final : public Answer {
 public:
  Request(std::string name, Log* log) : name_(std::move(name)), log_(log) {}
  void OnApplied(std::span<const Event> events) noexcept override {
    std::string s = name_ + " answered";
    for (const Event& e : events) {
      s += " " + std::to_string(std::get<engine::Deposited>(e.body).amount.value);
    }
    log_->Add(std::move(s));
    done.store(true);
  }
  std::atomic<bool> done{false};

 private:
  const std::string name_;
  Log* const log_;
};

bool WaitFor(const std::function<bool()>& f) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!f()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(FanoutStage, HandlersSeeTheBatchBeforeItsAnswersWhichGetTheirOwnEvents) {
  Log log;
  Recorder a("a", &log), b("b", &log);
  Stage stage;
  stage.Add(&a);
  stage.Add(&b);
  Request r5("r5", &log), r7("r7", &log);
  std::vector<Event> group;
  AddCommand(&group, 5, 2);
  AddCommand(&group, 6, 1);
  AddCommand(&group, 7, 3);
  stage.Hold(&r7, Sequence{7});  // held out of order: found by sequence
  stage.Hold(&r5, Sequence{5});
  stage.PublishDurable(group);
  EXPECT_EQ(stage.answers_waiting(), 2u);
  stage.Start();
  ASSERT_TRUE(WaitFor([&] { return r5.done.load() && r7.done.load(); }));
  stage.Stop();
  EXPECT_EQ(log.Get(), (std::vector<std::string>{
                           "a batch 5 5 6 7 7 7 end",
                           "b batch 5 5 6 7 7 7 end",
                           "r7 answered 700 701 702",
                           "r5 answered 500 501",
                       }));
  EXPECT_EQ(stage.answers_waiting(), 0u);
  EXPECT_EQ(stage.depth(), 0u);
}

TEST(FanoutStage, EndOfBatchMarksTheLastBatchOfARound) {
  Log log;
  Recorder a("a", &log);
  Stage stage;
  stage.Add(&a);
  for (uint64_t s = 1; s <= 3; ++s) {
    std::vector<Event> group;
    AddCommand(&group, s, 1);
    stage.PublishDurable(group);
  }
  EXPECT_EQ(stage.depth(), 3u);
  stage.Start();
  ASSERT_TRUE(WaitFor([&] { return stage.batches() == 3; }));
  stage.Stop();
  EXPECT_EQ(log.Get(), (std::vector<std::string>{"a batch 1", "a batch 2", "a batch 3 end"}));
}

TEST(FanoutStage, AnAnswerWithNothingToWaitForGetsNoEvents) {
  Log log;
  Recorder a("a", &log);
  Stage stage;
  stage.Add(&a);
  stage.Start();
  Request r("refused", &log);
  stage.PublishAnswer(&r);
  ASSERT_TRUE(WaitFor([&] { return r.done.load(); }));
  stage.Stop();
  EXPECT_EQ(log.Get(), (std::vector<std::string>{"a batch end", "refused answered"}));
}

// A handler stalls with two batches in a ring of two: the journal's next
// publication waits (counted) instead of dropping or overwriting a batch,
// and every batch arrives, in order, once the handler goes on.
TEST(FanoutStage, AFullRingHoldsTheProducerBackAndLosesNothing) {
  class Stalling final : public Handler {
   public:
    void OnBatch(const Batch& b, bool) override {
      while (stalled.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (const Event& e : b.events) seen.push_back(static_cast<uint64_t>(e.seq));
    }
    std::atomic<bool> stalled{true};
    std::vector<uint64_t> seen;  // mb-fanout's; read after Stop()
  } stalling;
  StageOptions o;
  o.capacity = 2;
  Stage stage(o);
  stage.Add(&stalling);
  stage.Start();
  std::atomic<int> published{0};
  std::thread journal([&] {
    for (uint64_t s = 1; s <= 20; ++s) {
      std::vector<Event> group;
      AddCommand(&group, s, 1);
      stage.PublishDurable(group);
      published.fetch_add(1);
    }
  });
  // One batch in the handler, two in the ring: the fourth waits.
  ASSERT_TRUE(WaitFor([&] { return stage.full_waits() > 0; }));
  EXPECT_LE(published.load(), 3);
  stalling.stalled.store(false);
  journal.join();
  stage.Stop();
  std::vector<uint64_t> want;
  for (uint64_t s = 1; s <= 20; ++s) want.push_back(s);
  EXPECT_EQ(stalling.seen, want);
}

TEST(FanoutStage, StopDeliversEverythingPublished) {
  Log log;
  Stage stage;
  stage.Start();
  std::vector<std::unique_ptr<Request>> requests;
  for (uint64_t s = 1; s <= 100; ++s) {
    requests.push_back(std::make_unique<Request>("r", &log));
    std::vector<Event> group;
    AddCommand(&group, s, 1);
    stage.Hold(requests.back().get(), Sequence{s});
    stage.PublishDurable(group);
  }
  stage.Stop();
  for (const auto& r : requests) EXPECT_TRUE(r->done.load());
  EXPECT_EQ(stage.batches(), 100u);
  EXPECT_EQ(stage.answers_waiting(), 0u);
}

// The projector's wake-up: one call per round, with the newest sequence.
TEST(FanoutStage, SequenceHandlerTellsTheNewestSequenceOncePerRound) {
  std::vector<uint64_t> told;
  SequenceHandler h([&](uint64_t s) { told.push_back(s); });
  Batch one, two, answers_only;
  AddCommand(&one.events, 3, 2);
  AddCommand(&two.events, 4, 1);
  h.OnBatch(one, false);
  h.OnBatch(two, true);
  h.OnBatch(answers_only, true);  // nothing new: nothing told
  AddCommand(&one.events, 9, 1);
  h.OnBatch(one, true);
  EXPECT_EQ(told, (std::vector<uint64_t>{4, 9}));
}

TEST(FanoutStage, EventsOfASequenceNotInTheBatchAreNone) {
  Batch b;
  AddCommand(&b.events, 2, 1);
  AddCommand(&b.events, 4, 2);
  EXPECT_TRUE(b.EventsOf(Sequence{3}).empty());
  EXPECT_TRUE(b.EventsOf(Sequence{1}).empty());
  EXPECT_TRUE(b.EventsOf(Sequence{5}).empty());
  EXPECT_EQ(b.EventsOf(Sequence{4}).size(), 2u);
}

}  // namespace
}  // namespace mb::fanout
